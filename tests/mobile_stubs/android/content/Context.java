package android.content;

import android.content.res.AssetManager;

public abstract class Context {
    public abstract AssetManager getAssets();
}
