/**
 * Power-loss simulation (RocksDB FaultInjectionTestFS "drop unsynced data"; ALICE, CrashMonkey).
 *
 * A recorder installed as the io.ts observer keeps every successful state-changing system call
 * of the store under one root directory, with a copy of the bytes written. `imageAt(cut, rng)`
 * replays calls 0..cut-1 into a model of the file system and builds, in a new directory, what
 * a power cut right after call `cut` may leave behind:
 * - a file's contents: what its last fdatasync made durable, plus an ARBITRARY subset of the
 *   4 KiB pages written since (each page kept or dropped independently; not just a prefix), with
 *   either its durable or its current size;
 * - the directory: the names as of the last directory fsync, plus a random-length prefix of the
 *   creates, renames and unlinks since (metadata journals commit in order).
 * Only the main thread is observed: the harness runs compaction inline (`workers: 0`). Every image
 * is also a reboot: imageAt gives the process a new simulated boot id.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import type { IoEvent } from "../../segments/io.js";
import { BOOT_ID_BYTES, simulateBootForTests } from "../../segments/boot-id.js";

/** 4 KiB: the unit in which the kernel writes dirty pages back, in no promised order. */
export const PAGE_BYTES = 4096;

export { rng as prng } from "./rng.js";

/** A recorded call: an io.ts event with its bytes copied. */
type Recorded = IoEvent & { copy?: Buffer };

/** Records the store's system calls under `root`. */
export class PowerLossRecorder {
  readonly root: string;
  readonly events: Recorded[] = [];
  constructor(root: string) {
    this.root = path.resolve(root);
  }

  /** The io.ts observer to install. */
  readonly observe = (e: IoEvent): void => {
    if (!path.resolve(e.path).startsWith(this.root)) return;
    if (e.op === "write") this.events.push({ ...e, copy: Buffer.concat(e.data.map((d) => Buffer.from(d.buffer, d.byteOffset, d.byteLength))) });
    else this.events.push(e);
  };

  /**
   * Builds in `out` what a power cut after the first `cut` calls may leave; returns what it
   * dropped. A power cut is also a restart: from here on this process runs under a new boot id
   * (segments/boot-id.ts), so an image is opened as after a reboot and refuses boot-stamped hints.
   */
  imageAt(cut: number, rng: () => number, out: string): { pagesDropped: number; pagesKept: number; dirOpsDropped: number } {
    simulateBootForTests(Buffer.from(Array.from({ length: BOOT_ID_BYTES }, () => Math.floor(rng() * 256))));
    const sim = new SimFs(this.root);
    for (const e of this.events.slice(0, cut)) sim.apply(e);
    return sim.materialize(rng, out);
  }
}

interface Inode {
  durable: Buffer;
  current: Buffer;
  dirty: Set<number>;
}

type DirOp = { op: "create"; name: string; inode: Inode } | { op: "rename"; from: string; to: string } | { op: "unlink"; name: string };

/** The file system model: inodes with durable and current bytes, and durable and current names. */
class SimFs {
  private readonly names = new Map<string, Inode>();
  private durableNames = new Map<string, Inode>();
  private pendingDirOps: DirOp[] = [];
  private readonly fds = new Map<number, Inode>();

  constructor(private readonly root: string) {}

  private rel(p: string): string {
    return path.relative(this.root, path.resolve(p));
  }

  apply(e: Recorded): void {
    switch (e.op) {
      case "open": {
        const name = this.rel(e.path);
        let inode = this.names.get(name);
        if (inode === undefined || e.flags.includes("x")) {
          inode = { durable: Buffer.alloc(0), current: Buffer.alloc(0), dirty: new Set() };
          this.names.set(name, inode);
          this.pendingDirOps.push({ op: "create", name, inode });
        } else if (e.flags.startsWith("w")) {
          this.resize(inode, 0);
        }
        this.fds.set(e.fd, inode);
        break;
      }
      case "write": {
        const inode = this.fds.get(e.fd);
        if (inode === undefined || e.copy === undefined) break;
        const end = e.offset + e.copy.length;
        if (end > inode.current.length) this.resize(inode, end);
        e.copy.copy(inode.current, e.offset);
        for (let p = Math.floor(e.offset / PAGE_BYTES); p * PAGE_BYTES < end; p++) inode.dirty.add(p);
        break;
      }
      case "truncate": {
        const inode = this.fds.get(e.fd);
        if (inode !== undefined) this.resize(inode, e.bytes);
        break;
      }
      case "sync": {
        const inode = this.fds.get(e.fd);
        if (inode === undefined) break;
        inode.durable = Buffer.from(inode.current);
        inode.dirty.clear();
        break;
      }
      case "close":
        this.fds.delete(e.fd);
        break;
      case "rename": {
        const from = this.rel(e.path);
        const to = this.rel(e.to);
        const inode = this.names.get(from);
        if (inode === undefined) break;
        this.names.delete(from);
        this.names.set(to, inode);
        this.pendingDirOps.push({ op: "rename", from, to });
        break;
      }
      case "unlink": {
        const name = this.rel(e.path);
        if (!this.names.has(name)) break;
        this.names.delete(name);
        this.pendingDirOps.push({ op: "unlink", name });
        break;
      }
      case "dir-sync":
        this.durableNames = new Map(this.names);
        this.pendingDirOps = [];
        break;
    }
  }

  /** A size change is data too: pages past the old end become dirty (zeros until written). */
  private resize(inode: Inode, size: number): void {
    const old = inode.current.length;
    const next = Buffer.alloc(size);
    inode.current.copy(next, 0, 0, Math.min(old, size));
    inode.current = next;
    for (let p = Math.floor(Math.min(old, size) / PAGE_BYTES); p * PAGE_BYTES < Math.max(old, size); p++) inode.dirty.add(p);
  }

  materialize(rng: () => number, out: string): { pagesDropped: number; pagesKept: number; dirOpsDropped: number } {
    const names = new Map(this.durableNames);
    const keepOps = Math.floor(rng() * (this.pendingDirOps.length + 1));
    for (const op of this.pendingDirOps.slice(0, keepOps)) {
      if (op.op === "create") names.set(op.name, op.inode);
      else if (op.op === "unlink") names.delete(op.name);
      else {
        const inode = names.get(op.from);
        names.delete(op.from);
        if (inode !== undefined) names.set(op.to, inode);
      }
    }
    let pagesDropped = 0;
    let pagesKept = 0;
    fs.mkdirSync(path.join(out, "segments"), { recursive: true });
    for (const [name, inode] of names) {
      const size = rng() < 0.5 ? inode.durable.length : inode.current.length;
      const bytes = Buffer.alloc(size);
      inode.durable.copy(bytes, 0, 0, Math.min(size, inode.durable.length));
      for (const p of inode.dirty) {
        const start = p * PAGE_BYTES;
        if (start >= size) continue;
        if (rng() < 0.5) {
          pagesDropped += 1;
          continue;
        }
        pagesKept += 1;
        const end = Math.min(size, start + PAGE_BYTES, inode.current.length);
        if (end > start) inode.current.copy(bytes, start, start, end);
        if (start + PAGE_BYTES > inode.current.length) bytes.fill(0, Math.max(start, inode.current.length), Math.min(size, start + PAGE_BYTES));
      }
      const file = path.join(out, name);
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, bytes, { mode: 0o600 });
    }
    return { pagesDropped, pagesKept, dirOpsDropped: this.pendingDirOps.length - keepOps };
  }
}
