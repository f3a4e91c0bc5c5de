package org.tensorflow.lite;

public interface Delegate {
    long getNativeHandle();
}
