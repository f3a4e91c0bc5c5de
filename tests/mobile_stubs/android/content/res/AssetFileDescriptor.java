package android.content.res;

import java.io.FileDescriptor;

public class AssetFileDescriptor {
    public FileDescriptor getFileDescriptor() { return null; }
    public long getStartOffset() { return 0; }
    public long getDeclaredLength() { return 0; }
}
