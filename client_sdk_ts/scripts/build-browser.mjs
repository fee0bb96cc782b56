// The browser bundle (issue 24, the bundle size target): dist/browser.js, the entry a page loads
// (the client, its policy, ledger, outbox and the mechanism loader), and one chunk per mechanism
// group and for sealing under dist/browser/, each imported by `import()` when a campaign first
// needs it. A page recording one categorical campaign fetches dist/browser.js and one chunk; one
// recording a secure-aggregation campaign the `dap` chunk (Prio3, HPKE, the DAP campaign
// document), and the categorical one too when the campaign randomizes locally with grr.
//
//   node scripts/build-browser.mjs        (npm run build runs it after tsc)
//
// esbuild's own --splitting would put the code the entry shares with a group (the words, SHA-256,
// the rationals) in further chunks that every page fetches; here the entry holds that code and
// lends it to the chunks: the entry exports what the chunks use of the modules it holds as
// `__ldpModules` (one array; an internal export, not API), and each chunk takes it from
// "../browser.js" instead of carrying a copy. The entry holds only what the client itself needs:
// what the mechanism groups share beyond it (the samplers, the config readers, the memoized
// chains, memo-chain.ts) is in the categorical chunk, which lends it as `__ldpCategorical` to
// the chunks that import its oracles anyway (the string mechanisms; multi, fourier and
// hierarchical); the other chunks (numeric, rappor-dbitflip, the amplification bound) bundle
// their own copy of the few parts they use. A module without classes and `let` is lent name by
// name: a chunk bundles its own copy of the names its lender does not lend; which names a chunk
// uses is found by trial bundles (tree-shaken, so a name only code the chunk drops mentions does
// not count). dbitflip and RAPPOR (in categorical.ts too) are a chunk of their own, which bundles
// the few helpers of that module it uses. A build's facts go to dist/browser-meta.json for
// `npm run size`.
import * as esbuild from "esbuild";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
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
 * The chunks whose modules may import categorical.ts, from the categorical chunk (a chunk whose
 * bundle then imports nothing of it does not load it); rappor-dbitflip bundles the few helpers
 * of categorical.ts it uses (the oracle factories are pure calls).
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
const CATEGORICAL_SPECIFIER = "ldp-telemetry:categorical";
/** What each lender exports of the names it lends, one array (an internal export, not API). */
const LENDER_ARRAY = { entry: "__ldpModules", categorical: "__ldpCategorical" };
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

const PROBE = "ldp-probe";

/**
 * The names of lendable modules that a trial bundle uses, by module index: in a trial each such
 * module exports a pure marker per name, `probe("<index>:<name>")`, and what the bundle keeps
 * after tree-shaking is what it uses (an import statement would list every name its module's
 * source mentions, used or not).
 */
function usedNames(code, names) {
  for (const match of code.matchAll(/"ldp-probe:(\d+):([\w$]+)"/g)) {
    const index = Number(match[1]);
    names.set(index, new Set([...(names.get(index) ?? []), match[2]]));
  }
}

/**
 * Whether a module of this package may be lent name by name, a chunk bundling its own copy of
 * the names it needs and its lender does not lend: a module without classes (a class has one
 * copy per page, for `instanceof`) and without `let` (one state per page). The entry lends the
 * other modules whole (what any chunk needs of them).
 */
function splittable(path) {
  return !path.includes("/node_modules/") && !/^(export )?(class|let) /m.test(readFileSync(path, "utf8"));
}

/**
 * In a chunk, a module its lender lends becomes a view of the lender's copy (`plan.slots`: the
 * index in the lender's array of each name it borrows, by module index; `plan.lender`: the
 * entry or the categorical chunk, by module index; `plan.own`: the modules of which the chunk
 * also bundles its own copy of the names not lent, `ldp-own:<path>`; null, a trial: every
 * lendable module exports markers, to learn what the chunk uses); the categorical oracles come
 * from their chunk.
 */
function borrow(bridge, plan, categoricalFile, exportsOf) {
  return {
    name: "ldp-borrow",
    setup(build) {
      // one module of the chunk imports a lender's array, and the views share it
      const lenders = { [ENTRY_SPECIFIER]: ["entry", "../browser.js"], [CATEGORICAL_SPECIFIER]: ["categorical", `./${categoricalFile}`] };
      build.onResolve({ filter: /^ldp-telemetry:/ }, (args) =>
        args.namespace === "ldp-lender" ? { path: lenders[args.path][1], external: true } : { path: lenders[args.path][0], namespace: "ldp-lender" },
      );
      build.onLoad({ filter: /.*/, namespace: "ldp-lender" }, (args) => {
        const specifier = args.path === "entry" ? ENTRY_SPECIFIER : CATEGORICAL_SPECIFIER;
        return { contents: `export { ${LENDER_ARRAY[args.path]} } from "${specifier}";\n`, loader: "js" };
      });
      build.onResolve({ filter: /^ldp-own:/ }, (args) => ({ path: args.path.slice("ldp-own:".length) }));
      build.onResolve({ filter: /.*/ }, async (args) => {
        if (args.pluginData?.usual || args.kind === "entry-point") return undefined;
        const path = await resolveAsUsual(build, args);
        if (path === null) return undefined;
        const index = bridge.indexOf(path);
        if (index >= 0 && plan === null) return { path, namespace: PROBE };
        if (index >= 0 && plan.slots.has(index)) return { path, namespace: "ldp-borrowed" };
        if (categoricalFile !== null && path === CHUNKS.categorical) return { path: `./${categoricalFile}`, external: true };
        return undefined;
      });
      build.onLoad({ filter: /.*/, namespace: PROBE }, (args) => {
        const index = bridge.indexOf(args.path);
        const markers = exportsOf.get(args.path).map((name) => `${name} = /* @__PURE__ */ probe("${PROBE}:${index}:${name}")`);
        return { contents: `import { probe } from "${PROBE}";\nexport const ${markers.join(", ")};\n`, loader: "js" };
      });
      build.onResolve({ filter: new RegExp(`^${PROBE}$`) }, () => ({ path: PROBE, external: true }));
      build.onLoad({ filter: /.*/, namespace: "ldp-borrowed" }, (args) => {
        const index = bridge.indexOf(args.path);
        const names = [...plan.slots.get(index)];
        const lender = plan.lender[index];
        const lines = [`import { ${LENDER_ARRAY[lender]} as m } from "${lender === "entry" ? ENTRY_SPECIFIER : CATEGORICAL_SPECIFIER}";`];
        lines.push(`export const ${names.map(([name, slot]) => `${name} = m[${slot}]`).join(", ")};`);
        // the names declared here take precedence over those of the star export
        if (plan.own.has(index)) lines.push(`export * from ${JSON.stringify(`ldp-own:${args.path}`)};`);
        else {
          // a name the chunk's sources import but its bundle does not use (tree-shaken away; a
          // use would fail loudly when the chunk loads)
          const unused = exportsOf.get(args.path).filter((name) => !plan.slots.get(index).has(name));
          const where = relative(pkg, args.path);
          lines.push(`function unlent(name) { throw new Error(\`${where}: \${name} is not lent to this chunk (scripts/build-browser.mjs)\`); }`);
          if (unused.length) lines.push(`export const ${unused.map((name) => `${name} = /* @__PURE__ */ unlent("${name}")`).join(", ")};`);
        }
        return { contents: lines.join("\n") + "\n", loader: "js", resolveDir: dirname(args.path) };
      });
    },
  };
}

/** The entry's source: the browser API, and `__ldpModules`, the names it lends (`lent`, by module). */
function entrySource(bridge, lent) {
  const lines = [`export * from "./browser.ts";`];
  bridge.forEach((path, i) => {
    const names = [...lent[i]].sort();
    if (names.length) lines.push(`import { ${names.map((name) => `${name} as m${i}_${name}`).join(", ")} } from ${JSON.stringify(path)};`);
  });
  const flat = bridge.flatMap((path, i) => [...lent[i]].sort().map((name) => `m${i}_${name}`));
  lines.push(`/** What the chunks under browser/ borrow (scripts/build-browser.mjs); internal, not API. */`);
  lines.push(`export const __ldpModules = [${flat.join(", ")}];`);
  return { contents: lines.join("\n"), resolveDir: src, sourcefile: "browser-entry.js", loader: "js" };
}

/**
 * Bytes a name may add to the minified entry and still count as held by it anyway (its slot in
 * `__ldpModules`); a name the entry does not hold adds its declaration.
 */
const HELD_SLACK = 8;

export async function buildBrowser() {
  rmSync(chunkDir, { recursive: true, force: true });
  mkdirSync(chunkDir, { recursive: true });
  const placeholders = Object.fromEntries(Object.keys(CHUNKS).map((chunk) => [chunk, `${chunk}.js`]));
  // 1. what the entry holds, and what of it the chunks use: the modules it lends them; and what
  // the mechanism groups share beyond it (the config readers, the samplers, the memoized chains):
  // the categorical chunk lends its copy to the chunks that import it, the others bundle theirs
  const held = await inputsOf({ entryPoints: [join(src, "browser.ts")], plugins: [chunkImports(placeholders)] });
  const inputs = {};
  for (const [chunk, file] of Object.entries(CHUNKS)) inputs[chunk] = await inputsOf({ entryPoints: [file] });
  const shared = new Set();
  for (const paths of Object.values(inputs)) for (const path of paths) if (held.has(path) && LEND(path)) shared.add(path);
  const categoricalShared = new Set();
  for (const chunk of BORROWS_CATEGORICAL) {
    for (const path of inputs[chunk]) {
      if (!held.has(path) && inputs.categorical.has(path) && path !== CHUNKS.categorical && splittable(path)) categoricalShared.add(path);
    }
  }
  const bridge = [...[...shared].sort(), ...[...categoricalShared].sort()];
  /** Who lends each module of `bridge`: the entry, or the categorical chunk. */
  const lender = bridge.map((path) => (shared.has(path) ? "entry" : "categorical"));
  /** Whether `chunk` may borrow module `i` (the categorical chunk lends to the chunks that import it). */
  const canBorrow = (chunk, i) => lender[i] === "entry" || importsCategorical.has(chunk);
  const exportsOf = new Map();
  for (const path of bridge) exportsOf.set(path, await exportNames(path));
  const split = bridge.map((path) => splittable(path));
  /** The chunks that import the categorical chunk (and may borrow what it lends). */
  const importsCategorical = new Set();
  const chunkExports = Object.fromEntries(Object.entries(CHUNK_EXPORTS).map(([chunk, names]) => [chunk, new Set(names)]));
  /** What code (`contents`, an ES module) imports of each lendable module, and of the categorical chunk. */
  const trialNeeds = async (contents, resolveDir, chunk) => {
    const trial = await esbuild.build({
      ...COMMON,
      stdin: { contents, resolveDir, sourcefile: `${chunk}.js`, loader: "js" },
      write: false,
      outdir: "/tmp/ldp-unused",
      plugins: [borrow(bridge, null, BORROWS_CATEGORICAL.has(chunk) ? "categorical.js" : null, exportsOf)],
    });
    const names = new Map();
    for (const output of trial.outputFiles) {
      usedNames(output.text, names);
      if (output.text.includes('"./categorical.js"')) importsCategorical.add(chunk);
      for (const match of output.text.matchAll(/import\s*\{([^}]*)\}\s*from\s*"\.\/categorical\.js"/g)) {
        for (const part of match[1].split(",")) if (part.trim()) chunkExports.categorical.add(part.trim().split(/\s+as\s+/)[0]);
      }
    }
    return names;
  };
  const merge = (into, from) => {
    for (const [i, names] of from) into.set(i, new Set([...(into.get(i) ?? []), ...names]));
  };
  // which names of each lendable module each chunk's own code imports (the categorical chunk
  // last: it also exports what the others import of it)
  const direct = {};
  const order = [...Object.keys(CHUNKS).filter((chunk) => chunk !== "categorical"), "categorical"];
  for (const chunk of order) {
    const exports = [...chunkExports[chunk]].sort().join(", ");
    direct[chunk] = await trialNeeds(`export { ${exports} } from ${JSON.stringify(CHUNKS[chunk])};`, dirname(CHUNKS[chunk]), chunk);
  }
  // What the entry lends: of a module it may lend name by name, what the categorical chunk needs
  // (the entry's page needs it anyway); the categorical chunk lends what it holds. A chunk
  // bundles its own copy of what else it needs of such a module, and what that copy imports
  // counts as the chunk's needs too.
  const lentNames = bridge.map((path, i) => (split[i] ? new Set(direct.categorical.get(i) ?? []) : null));
  /** What each chunk needs, its own copies' imports included, with the lenders lending `lentNames`. */
  const expand = async () => {
    const needs = {};
    for (const chunk of order) {
      needs[chunk] = new Map([...direct[chunk]].map(([i, names]) => [i, new Set(names)]));
      const expanded = new Map();
      for (let grown = true; grown; ) {
        grown = false;
        for (const [i, wanted] of [...needs[chunk]]) {
          const lent = canBorrow(chunk, i) ? lentNames[i] : new Set();
          const own = split[i] ? [...wanted].filter((name) => !lent.has(name) && !expanded.get(i)?.has(name)).sort() : [];
          if (own.length === 0) continue;
          expanded.set(i, new Set([...(expanded.get(i) ?? []), ...own]));
          merge(needs[chunk], await trialNeeds(`export { ${own.join(", ")} } from ${JSON.stringify(`ldp-own:${bridge[i]}`)};`, pkg, chunk));
          grown = true;
        }
      }
    }
    return needs;
  };
  let needs = await expand();
  // Of another module of this package, what any chunk needs (one copy of each class); of a
  // library's (SHA-256, HMAC), what the chunks of categorical.ts need (MD5 for RAPPOR reuses most
  // of SHA-256's code), and a chunk needing more of such a module bundles its own copy.
  bridge.forEach((path, i) => {
    if (split[i]) return;
    if (path.includes("/node_modules/")) lentNames[i] = new Set([...(needs.categorical.get(i) ?? []), ...(needs["rappor-dbitflip"].get(i) ?? [])]);
    else lentNames[i] = new Set(Object.values(needs).flatMap((byModule) => [...(byModule.get(i) ?? [])]));
  });
  // and whatever else a chunk needs that the entry holds anyway (lending it costs its slot)
  const entryBytes = async (lent) =>
    (await esbuild.build({ ...COMMON, stdin: entrySource(bridge, lent.map((names, i) => (lender[i] === "entry" ? names : new Set()))), write: false, outdir: "/tmp/ldp-unused", plugins: [chunkImports(placeholders)] })).outputFiles[0].contents.length;
  const base = await entryBytes(lentNames);
  const candidates = new Set();
  for (const byModule of Object.values(needs)) {
    for (const [i, names] of byModule) for (const name of names) if (lender[i] === "entry" && !lentNames[i].has(name)) candidates.add(`${i}\0${name}`);
  }
  for (const candidate of [...candidates].sort()) {
    const [i, name] = [Number(candidate.split("\0")[0]), candidate.split("\0")[1]];
    const trial = lentNames.map((names, j) => (j === i ? new Set([...names, name]) : names));
    if ((await entryBytes(trial)) - base <= HELD_SLACK) lentNames[i].add(name);
  }
  needs = await expand();
  /** The names each lender lends, in the order of its array. */
  const flat = (who) => bridge.flatMap((path, i) => (lender[i] === who ? [...lentNames[i]].sort().map((name) => ({ module: i, name })) : []));
  const slotOf = { entry: flat("entry"), categorical: flat("categorical") };
  const planOf = (chunk) => {
    const slots = new Map();
    const own = new Set();
    for (const [i, wanted] of needs[chunk]) {
      if (!canBorrow(chunk, i)) continue; // the chunk bundles its own copy
      const lent = [...wanted].filter((name) => lentNames[i].has(name));
      if (lent.length < wanted.size) {
        if (!split[i]) continue; // a library module: the chunk bundles its own copy
        own.add(i);
      }
      const order = slotOf[lender[i]];
      if (lent.length > 0) slots.set(i, new Map(lent.map((name) => [name, order.findIndex((f) => f.module === i && f.name === name)])));
    }
    return { slots, own, lender };
  };
  // 2. the chunks, each importing the lent modules from its lenders
  const names = {};
  const lentBy = (who) => Object.fromEntries(bridge.flatMap((path, i) => (lender[i] === who ? [[relative(pkg, path), [...lentNames[i]].sort()]] : [])));
  const meta = { entry: "browser.js", chunks: {}, lent: lentBy("entry"), lentByCategorical: lentBy("categorical") };
  for (const [chunk, file] of Object.entries(CHUNKS)) {
    const lines = [`export { ${[...chunkExports[chunk]].sort().join(", ")} } from ${JSON.stringify(file)};`];
    if (chunk === "categorical") {
      // what the categorical chunk lends, as the entry does (internal, not API)
      bridge.forEach((path, i) => {
        const lent = lender[i] === "categorical" ? [...lentNames[i]].sort() : [];
        if (lent.length) lines.push(`import { ${lent.map((name) => `${name} as m${i}_${name}`).join(", ")} } from ${JSON.stringify(path)};`);
      });
      lines.push(`export const ${LENDER_ARRAY.categorical} = [${slotOf.categorical.map(({ module, name }) => `m${module}_${name}`).join(", ")}];`);
    }
    const result = await esbuild.build({
      ...COMMON,
      stdin: { contents: lines.join("\n"), resolveDir: dirname(file), sourcefile: `${chunk}.js`, loader: "js" },
      outdir: chunkDir,
      entryNames: `${chunk}-[hash]`,
      metafile: true,
      plugins: [borrow(bridge, planOf(chunk), importsCategorical.has(chunk) ? names.categorical : null, exportsOf)],
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
  const entry = await esbuild.build({
    ...COMMON,
    stdin: entrySource(bridge, lentNames.map((names, i) => (lender[i] === "entry" ? names : new Set()))),
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
