// The keras_vit browser demo: MediaPipe Tasks' ImageClassifier on a
// keras_vit .tflite, with the WebAssembly files served from the npm package
// beside this page (never a CDN).
//
// Query parameters (the test harness uses them; a user may too):
//   model=URL   a .tflite to load instead of the file chooser's
//   image=URL   an image to classify instead of the file chooser's
//   k=N         how many classes to show (default 5)
//   report=URL  POST the outcome there as JSON: {categories} or {error}
import {
  FilesetResolver,
  ImageClassifier,
} from "./node_modules/@mediapipe/tasks-vision/vision_bundle.mjs";

const WASM = new URL(
  "./node_modules/@mediapipe/tasks-vision/wasm",
  import.meta.url,
).href;
const query = new URLSearchParams(location.search);
const topK = Number(query.get("k") ?? 5);
const status = document.getElementById("status");
const preview = document.getElementById("preview");
let modelBuffer = null;

function show(text, isError = false) {
  status.textContent = text;
  status.className = isError ? "error" : "";
}

async function report(outcome) {
  const url = query.get("report");
  if (url) {
    await fetch(url, { method: "POST", body: JSON.stringify(outcome) });
  }
}

function render(categories) {
  const list = document.getElementById("results");
  list.replaceChildren(
    ...categories.map((c) => {
      const item = document.createElement("li");
      const name = c.displayName || c.categoryName || `class ${c.index}`;
      item.textContent = `${name}: ${c.score.toFixed(4)}`;
      return item;
    }),
  );
}

async function classify() {
  const fileset = await FilesetResolver.forVisionTasks(WASM);
  const classifier = await ImageClassifier.createFromOptions(fileset, {
    baseOptions: { modelAssetBuffer: modelBuffer, delegate: "CPU" },
    maxResults: topK,
  });
  const result = classifier.classify(preview);
  classifier.close();
  const categories = result.classifications[0].categories.map((c) => ({
    index: c.index,
    score: c.score,
    categoryName: c.categoryName,
    displayName: c.displayName,
  }));
  render(categories);
  show(`Top ${categories.length} classes:`);
  return categories;
}

async function run() {
  if (!modelBuffer || !preview.complete || !preview.naturalWidth) return;
  show("Classifying...");
  await report({ categories: await classify() });
}

async function loadImage(src) {
  preview.src = src;
  await preview.decode();
}

// Runs `step`, showing (and reporting) what it throws.
async function guarded(step) {
  try {
    await step();
  } catch (error) {
    show(String(error?.message ?? error), true);
    await report({ error: String(error?.message ?? error) });
  }
}

document.getElementById("model").addEventListener("change", (e) =>
  guarded(async () => {
    modelBuffer = new Uint8Array(await e.target.files[0].arrayBuffer());
    await run();
  }),
);
document.getElementById("image").addEventListener("change", (e) =>
  guarded(async () => {
    await loadImage(URL.createObjectURL(e.target.files[0]));
    await run();
  }),
);

guarded(async () => {
  if (!Number.isInteger(topK) || topK < 1) {
    throw new Error(`k must be a positive integer, got ${query.get("k")}`);
  }
  if (query.get("model")) {
    const response = await fetch(query.get("model"));
    if (!response.ok) throw new Error(`model: HTTP ${response.status}`);
    modelBuffer = new Uint8Array(await response.arrayBuffer());
  }
  if (query.get("image")) await loadImage(query.get("image"));
  await run();
});
