// The browser bundle (issue 24, the bundle size target): dist/browser.js, the entry a page loads
// (the client, its policy, ledger, outbox and the mechanism loader), and one chunk per mechanism
// group and for sealing under dist/browser/, each imported by `import()` when a campaign first
// needs it. A page recording one categorical campaign fetches dist/browser.js and one chunk; one
// recording a secure-aggregation campaign the `dap` chunk (Prio3, HPKE, the DAP campaign
// document), and the categorical one too when the campaign randomizes locally with grr.
//
//   node scripts/build-browser.mjs        (npm run build runs it after tsc)
//
// esbuild's own --splitting would put the code the entry shares with a group (the samplers, the
// words, SHA-256) in further chunks that every page fetches; here the entry holds that code and
// lends it to the chunks: the entry exports what the chunks use of the modules it holds as
// `__ldpModules` (one array; an internal export, not API), and each chunk takes it from
// "../browser.js" instead of carrying a copy. The string mechanisms and multi, fourier and
// hierarchical, which reuse categorical oracles, import them from the categorical chunk;
// dbitflip and RAPPOR (in categorical.ts too) are a chunk of their own, which bundles the few
// helpers of that module it uses. A build's facts go to dist/browser-meta.json for
// `npm run size`.
import * as esbuild from "esbuild";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const pkg = join(dirname(fileURLToPath(import.meta.url)), "..");
const src = join(pkg, "src");
const out = join(pkg, "dist");
const chunkDir = join(out, "browser");

/** The chunks, in build order (a later chunk may import an earlier one), and their sources. */
export const CHUNKS = {
  categorical: join(src, "mechanisms", "categorical.ts"),
  "rappor-dbitflip": join(src, "mechanisms", "rappor-dbitflip.ts"),
  numeric: join(src, "mechanisms", "numeric.ts"),
  strings: join(src, "mechanisms", "strings.ts"),
  "multi-fourier-hierarchical": join(src, "mechanisms", "multi-fourier-hierarchical.ts"),
  // the shuffle amplification bound, for shuffled campaigns (the policy's central ceiling)
  amplification: join(src, "amplification.ts"),
  sealing: join(src, "sealing.ts"),
  dap: join(src, "dap", "driver.ts"),
};
/**
 * What each chunk exports: what the loader (or the client) takes from it, and what later chunks
 * import from it (found by the build); the rest of its module is left out when nothing uses it.
 */
/**
 * The chunks that import the categorical oracles from the categorical chunk; rappor-dbitflip
 * bundles the few helpers of categorical.ts it uses (the oracle factories are pure calls).
 */
const BORROWS_CATEGORICAL = new Set(["numeric", "strings", "multi-fourier-hierarchical"]);
const CHUNK_EXPORTS = {
  categorical: ["CATEGORICAL_FACTORIES"],
  "rappor-dbitflip": ["RAPPOR_DBITFLIP_FACTORIES"],
  numeric: ["NUMERIC_FACTORIES"],
  strings: ["STRINGS_FACTORIES"],
  "multi-fourier-hierarchical": ["MULTI_FOURIER_HIERARCHICAL_FACTORIES"],
  amplification: ["AMPLIFICATION"],
  sealing: ["sealPayload"],
  dap: ["dapEntry"],
};
/** Which dynamic `import()` of which module loads which chunk. */
const DYNAMIC = [
  { importer: join(src, "mechanisms", "loader.ts"), path: "./categorical.js", chunk: "categorical" },
  { importer: join(src, "mechanisms", "loader.ts"), path: "./rappor-dbitflip.js", chunk: "rappor-dbitflip" },
  { importer: join(src, "mechanisms", "loader.ts"), path: "./numeric.js", chunk: "numeric" },
  { importer: join(src, "mechanisms", "loader.ts"), path: "./strings.js", chunk: "strings" },
  { importer: join(src, "mechanisms", "loader.ts"), path: "./multi-fourier-hierarchical.js", chunk: "multi-fourier-hierarchical" },
  { importer: join(src, "client.ts"), path: "./amplification.js", chunk: "amplification" },
  { importer: join(src, "client.ts"), path: "./sealing.js", chunk: "sealing" },
  { importer: join(src, "client.ts"), path: "./dap/driver.js", chunk: "dap" },
];
const COMMON = {
  absWorkingDir: pkg, // the metafile's paths are relative to it
  bundle: true,
  format: "esm",
  minify: true,
  platform: "browser",
  target: "es2022",
  legalComments: "none",
  logLevel: "warning",
};
const ENTRY_SPECIFIER = "ldp-telemetry:entry";
/**
 * Whether the entry lends a module it holds to the chunks that use it. Not @noble/hashes' 64-bit
 * helpers: SHA-256 needs none of them and lending them would put all of them in every page; the
 * BLAKE2b of the string mechanisms and of sealing bundles its own.
 */
const LEND = (path) => !path.endsWith("/@noble/hashes/esm/_u64.js");

/** Resolves `args` as esbuild would, without this plugin (absolute path, or null when external). */
async function resolveAsUsual(build, args) {
  const result = await build.resolve(args.path, { kind: args.kind, importer: args.importer, resolveDir: args.resolveDir, pluginData: { usual: true } });
  if (result.errors.length) return null;
  return result.external ? null : result.path;
}

/** The entry's dynamic imports point at the chunks' files (`names`: chunk to its file, or a placeholder). */
function chunkImports(names) {
  return {
    name: "ldp-chunk-imports",
    setup(build) {
      build.onResolve({ filter: /^\.\/(categorical|rappor-dbitflip|numeric|strings|multi-fourier-hierarchical|sealing|amplification|dap\/driver)\.js$/ }, (args) => {
        if (args.kind !== "dynamic-import") return undefined;
        const target = DYNAMIC.find((d) => d.importer === args.importer && d.path === args.path);
        if (target === undefined) throw new Error(`${relative(pkg, args.importer)} imports ${args.path} dynamically: scripts/build-browser.mjs does not know that chunk`);
        return { path: `./browser/${names[target.chunk]}`, external: true };
      });
    },
  };
}

/** Minified bytes of each module in an output (esbuild's metafile), largest first. */
function inputBytes(output) {
  const rows = Object.entries(output.inputs).filter(([, input]) => input.bytesInOutput > 0);
  return Object.fromEntries(rows.sort((a, b) => b[1].bytesInOutput - a[1].bytesInOutput).map(([path, input]) => [path.replace(/^.*node_modules\//, ""), input.bytesInOutput]));
}

/** The absolute paths of the modules a bundle of `entry` includes (with `plugins`). */
async function inputsOf(options) {
  const result = await esbuild.build({ ...COMMON, ...options, write: false, metafile: true, outdir: "/tmp/ldp-unused" });
  return new Set(Object.keys(result.metafile.inputs).map((path) => join(pkg, path)));
}

/** The names a module exports (types erased). */
async function exportNames(file) {
  const result = await esbuild.build({ entryPoints: [file], bundle: false, format: "esm", write: false, metafile: true, outdir: "/tmp/ldp-unused", logLevel: "silent" });
  return Object.values(result.metafile.outputs).flatMap((output) => output.exports ?? []);
}

/** The names minified code imports from `lent:<index>` specifiers, by index (a namespace import: every export). */
function importedNames(code, names, exportsOf, bridge) {
  for (const match of code.matchAll(/import\s*(\*\s*as\s*[\w$]+|\{([^}]*)\})\s*from\s*"ldp-lent:(\d+)"/g)) {
    const index = Number(match[3]);
    const set = names.get(index) ?? new Set();
    if (match[2] === undefined) for (const name of exportsOf.get(bridge[index])) set.add(name);
    else for (const part of match[2].split(",")) if (part.trim()) set.add(part.trim().split(/\s+as\s+/)[0]);
    names.set(index, set);
  }
}

/**
 * In a chunk, a module the entry lends becomes a view of the entry's copy (`slots`: the index in
 * `__ldpModules` of each name it borrows, by module index; null: leave every lendable module an
 * external `ldp-lent:<index>`, to learn what the chunk imports); the categorical oracles come
 * from their chunk.
 */
function borrow(bridge, slots, categoricalFile) {
  return {
    name: "ldp-borrow",
    setup(build) {
      build.onResolve({ filter: new RegExp(`^${ENTRY_SPECIFIER}$`) }, () => ({ path: "../browser.js", external: true }));
      build.onResolve({ filter: /.*/ }, async (args) => {
        if (args.pluginData?.usual || args.kind === "entry-point") return undefined;
        const path = await resolveAsUsual(build, args);
        if (path === null) return undefined;
        const index = bridge.indexOf(path);
        if (index >= 0 && slots === null) return { path: `ldp-lent:${index}`, external: true };
        if (index >= 0 && slots.has(index)) return { path, namespace: "ldp-borrowed" };
        if (categoricalFile !== null && path === CHUNKS.categorical) return { path: `./${categoricalFile}`, external: true };
        return undefined;
      });
      build.onLoad({ filter: /.*/, namespace: "ldp-borrowed" }, (args) => {
        const names = [...slots.get(bridge.indexOf(args.path))];
        return {
          contents: `import { __ldpModules as m } from "${ENTRY_SPECIFIER}";\nexport const ${names.map(([name, slot]) => `${name} = m[${slot}]`).join(", ")};\n`,
          loader: "js",
          resolveDir: dirname(args.path),
        };
      });
    },
  };
}

export async function buildBrowser() {
  rmSync(chunkDir, { recursive: true, force: true });
  mkdirSync(chunkDir, { recursive: true });
  const placeholders = Object.fromEntries(Object.keys(CHUNKS).map((chunk) => [chunk, `${chunk}.js`]));
  // 1. what the entry holds, and what of it the chunks use: the modules it lends them
  const held = await inputsOf({ entryPoints: [join(src, "browser.ts")], plugins: [chunkImports(placeholders)] });
  // the config readers every mechanism group uses: in the entry once rather than in each chunk
  held.add(join(src, "mechanisms", "fields.ts"));
  const shared = new Set();
  for (const file of Object.values(CHUNKS)) for (const path of await inputsOf({ entryPoints: [file] })) if (held.has(path)) shared.add(path);
  const bridge = [...shared].filter((path) => LEND(path)).sort();
  const exportsOf = new Map();
  for (const path of bridge) exportsOf.set(path, await exportNames(path));
  // which names of each lendable module each chunk imports, and of the categorical chunk
  const needs = {};
  const chunkExports = Object.fromEntries(Object.entries(CHUNK_EXPORTS).map(([chunk, names]) => [chunk, new Set(names)]));
  for (const [chunk, file] of Object.entries(CHUNKS)) {
    const trial = await esbuild.build({
      ...COMMON,
      entryPoints: [file],
      write: false,
      outdir: "/tmp/ldp-unused",
      plugins: [borrow(bridge, null, BORROWS_CATEGORICAL.has(chunk) ? "categorical.js" : null)],
    });
    needs[chunk] = new Map();
    for (const output of trial.outputFiles) {
      importedNames(output.text, needs[chunk], exportsOf, bridge);
      for (const match of output.text.matchAll(/import\s*\{([^}]*)\}\s*from\s*"\.\/categorical\.js"/g)) {
        for (const part of match[1].split(",")) if (part.trim()) chunkExports.categorical.add(part.trim().split(/\s+as\s+/)[0]);
      }
    }
  }
  // What the entry lends: of this package's modules, what any chunk needs (one copy of each
  // class); of a library's, what the categorical chunk needs (the entry's page needs them
  // anyway), and a chunk needing more of such a module bundles its own copy.
  const lentNames = bridge.map((path, i) => {
    if (path.includes("/node_modules/")) return new Set(needs.categorical.get(i) ?? []);
    return new Set(Object.values(needs).flatMap((byModule) => [...(byModule.get(i) ?? [])]));
  });
  const flat = bridge.flatMap((path, i) => [...lentNames[i]].sort().map((name) => ({ module: i, name })));
  const slotsOf = (chunk) => {
    const slots = new Map();
    for (const [i, wanted] of needs[chunk]) {
      if (![...wanted].every((name) => lentNames[i].has(name))) continue;
      slots.set(i, new Map([...wanted].map((name) => [name, flat.findIndex((f) => f.module === i && f.name === name)])));
    }
    return slots;
  };
  // 2. the chunks, each importing the lent modules from the entry
  const names = {};
  const meta = { entry: "browser.js", chunks: {}, lent: Object.fromEntries(bridge.map((path, i) => [relative(pkg, path), [...lentNames[i]].sort()])) };
  for (const [chunk, file] of Object.entries(CHUNKS)) {
    const result = await esbuild.build({
      ...COMMON,
      stdin: { contents: `export { ${[...chunkExports[chunk]].sort().join(", ")} } from ${JSON.stringify(file)};`, resolveDir: dirname(file), sourcefile: `${chunk}.js`, loader: "js" },
      outdir: chunkDir,
      entryNames: `${chunk}-[hash]`,
      metafile: true,
      plugins: [borrow(bridge, slotsOf(chunk), BORROWS_CATEGORICAL.has(chunk) ? names.categorical : null)],
    });
    const [output, info] = Object.entries(result.metafile.outputs).find(([path]) => path.endsWith(".js"));
    names[chunk] = output.split("/").pop();
    meta.chunks[chunk] = {
      file: `browser/${names[chunk]}`,
      imports: info.imports.filter((i) => i.external).map((i) => i.path),
      inputs: inputBytes(info),
    };
  }
  // 3. the entry, with its dynamic imports pointing at the chunks and the lent modules exported
  const lines = [`export * from "./browser.ts";`];
  bridge.forEach((path, i) => {
    const names = [...lentNames[i]].sort();
    if (names.length) lines.push(`import { ${names.map((name) => `${name} as m${i}_${name}`).join(", ")} } from ${JSON.stringify(path)};`);
  });
  lines.push(`/** What the chunks under browser/ borrow (scripts/build-browser.mjs); internal, not API. */`);
  lines.push(`export const __ldpModules = [${flat.map(({ module, name }) => `m${module}_${name}`).join(", ")}];`);
  const entry = await esbuild.build({
    ...COMMON,
    stdin: { contents: lines.join("\n"), resolveDir: src, sourcefile: "browser-entry.js", loader: "js" },
    outfile: join(out, "browser.js"),
    metafile: true,
    plugins: [chunkImports(names)],
  });
  const [, entryInfo] = Object.entries(entry.metafile.outputs).find(([path]) => path.endsWith("browser.js"));
  meta.entryInputs = inputBytes(entryInfo);
  writeFileSync(join(out, "browser-meta.json"), JSON.stringify(meta, null, 2) + "\n");
  return meta;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await buildBrowser();
