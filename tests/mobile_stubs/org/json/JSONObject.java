package org.json;

public class JSONObject {
    public JSONObject(String json) throws JSONException {}
    public JSONArray getJSONArray(String name) throws JSONException { return null; }
    public JSONObject getJSONObject(String name) throws JSONException { return null; }
    public JSONObject optJSONObject(String name) { return null; }
    public int getInt(String name) throws JSONException { return 0; }
    public double getDouble(String name) throws JSONException { return 0; }
    public String getString(String name) throws JSONException { return null; }
    public boolean isNull(String name) { return true; }
}
