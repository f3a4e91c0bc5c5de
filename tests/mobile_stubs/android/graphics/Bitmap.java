package android.graphics;

public final class Bitmap {
    public static Bitmap createScaledBitmap(Bitmap src, int dstWidth, int dstHeight, boolean filter) {
        return null;
    }
    public static Bitmap createBitmap(Bitmap source, int x, int y, int width, int height) {
        return null;
    }
    public int getWidth() { return 0; }
    public int getHeight() { return 0; }
    public void getPixels(int[] pixels, int offset, int stride, int x, int y, int width, int height) {}
}
