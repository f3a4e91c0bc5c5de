package android.graphics;

public final class Bitmap {
    public static Bitmap createScaledBitmap(Bitmap src, int dstWidth, int dstHeight, boolean filter) {
        return null;
    }
    public void getPixels(int[] pixels, int offset, int stride, int x, int y, int width, int height) {}
}
