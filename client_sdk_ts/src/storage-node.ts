/** A state folder for Node: one file per key, replaced atomically and durably (Node only). */
import { mkdirSync } from "node:fs";
import { open, readFile, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import type { StateStorage } from "./storage.js";

const KEY = /^[a-z0-9_]{1,64}$/;

/** State in `directory` (created 0700): `KEY.json` files, each written to a temporary file, fsynced and renamed. */
export class FolderStorage implements StateStorage {
  readonly kind: string;

  constructor(readonly directory: string) {
    if (typeof directory !== "string" || directory === "") {
      throw new TypeError(`directory must be a path; got a ${typeof directory}`);
    }
    mkdirSync(directory, { recursive: true, mode: 0o700 });
    this.kind = `folder:${directory}`;
  }

  #path(key: string): string {
    if (!KEY.test(key)) throw new RangeError(`a state key must be lowercase letters, digits and '_'`);
    return join(this.directory, `${key}.json`);
  }

  async get(key: string): Promise<string | null> {
    try {
      return await readFile(this.#path(key), "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw error;
    }
  }

  async set(entries: ReadonlyArray<readonly [string, string | null]>): Promise<void> {
    for (const [key, value] of entries) {
      const path = this.#path(key);
      if (value === null) {
        await rm(path, { force: true });
        continue;
      }
      const temporary = `${path}.${process.pid}.tmp`;
      const handle = await open(temporary, "w", 0o600);
      try {
        await handle.writeFile(value, "utf8");
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(temporary, path);
    }
    const directory = await open(this.directory, "r");
    try {
      await directory.sync();
    } finally {
      await directory.close();
    }
  }
}
