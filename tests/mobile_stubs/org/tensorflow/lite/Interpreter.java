package org.tensorflow.lite;

import java.nio.ByteBuffer;

public final class Interpreter implements AutoCloseable {
    public static class Options {
        public Options() {}
        public Options setNumThreads(int numThreads) { return this; }
        public Options addDelegate(Delegate delegate) { return this; }
    }

    public Interpreter(ByteBuffer byteBuffer, Options options) {}
    public void run(Object input, Object output) {}
    @Override public void close() {}
}
