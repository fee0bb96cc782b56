/**
 * Where a client keeps its state (device secret, outbox, privacy ledger, campaign cache): a few
 * named JSON texts. IndexedDB in browsers, a state folder in Node (`storage-node.ts`), memory
 * when the app asks. Only randomized reports and counts are ever stored, never a raw value.
 */

/** A small key-value store of JSON texts. */
export interface StateStorage {
  /** What it is, for `status()` ("memory", "indexeddb:NAME", "folder:PATH"). */
  readonly kind: string;
  /** The text stored under `key`, or `null`. */
  get(key: string): Promise<string | null>;
  /** Store every entry in order, `null` deleting it (IndexedDB: in one transaction); throws when storage fails. */
  set(entries: ReadonlyArray<readonly [string, string | null]>): Promise<void>;
  /** Release what it holds open. */
  close?(): Promise<void>;
}

/** State kept in memory only: lost when the page or process ends. */
export class MemoryStorage implements StateStorage {
  readonly kind = "memory";
  readonly #entries = new Map<string, string>();

  async get(key: string): Promise<string | null> {
    return this.#entries.get(key) ?? null;
  }

  async set(entries: ReadonlyArray<readonly [string, string | null]>): Promise<void> {
    for (const [key, value] of entries) {
      if (value === null) this.#entries.delete(key);
      else this.#entries.set(key, value);
    }
  }
}

function request<T>(operation: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    operation.onsuccess = () => resolve(operation.result);
    operation.onerror = () => reject(operation.error ?? new Error("IndexedDB request failed"));
  });
}

/** State in the browser's IndexedDB (database `name`, one object store). */
export class IndexedDBStorage implements StateStorage {
  readonly kind: string;
  readonly #database: Promise<IDBDatabase>;

  constructor(name = "ldp-telemetry") {
    this.kind = `indexeddb:${name}`;
    const factory = (globalThis as { indexedDB?: IDBFactory }).indexedDB;
    if (factory === undefined) {
      // Not thrown: the client finds storage unavailable, keeps working in memory and says so.
      this.#database = Promise.reject(new Error("IndexedDB is not available here"));
    } else {
      const opening = factory.open(name, 1);
      opening.onupgradeneeded = () => opening.result.createObjectStore("state");
      this.#database = request(opening);
    }
    this.#database.catch(() => undefined);
  }

  async get(key: string): Promise<string | null> {
    const database = await this.#database;
    const value: unknown = await request(database.transaction("state", "readonly").objectStore("state").get(key));
    return typeof value === "string" ? value : null;
  }

  async set(entries: ReadonlyArray<readonly [string, string | null]>): Promise<void> {
    const database = await this.#database;
    const transaction = database.transaction("state", "readwrite", { durability: "strict" });
    const store = transaction.objectStore("state");
    for (const [key, value] of entries) {
      if (value === null) store.delete(key);
      else store.put(value, key);
    }
    await new Promise<void>((resolve, reject) => {
      transaction.oncomplete = () => resolve();
      transaction.onerror = () => reject(transaction.error ?? new Error("IndexedDB write failed"));
      transaction.onabort = () => reject(transaction.error ?? new Error("IndexedDB write aborted"));
    });
  }

  async close(): Promise<void> {
    (await this.#database).close();
  }
}
