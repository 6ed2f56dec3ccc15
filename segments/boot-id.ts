/**
 * The kernel's boot id: 16 bytes that name one boot of this machine (Linux:
 * /proc/sys/kernel/random/boot_id, a UUID the kernel draws at boot). A hint stamped with it
 * (segments/hint.ts, version 4) may describe bytes that sit only in the page cache; those bytes
 * are readable exactly as long as the machine has not restarted, so the hint is trusted only
 * under the same id. Where there is no such file (another OS, a sandbox without /proc) the id is
 * null and nothing is stamped: a close then syncs as it always did.
 */
import * as fs from "node:fs";

/** Bytes of a boot id (a UUID). */
export const BOOT_ID_BYTES = 16;

const BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id";
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The id read once per process (undefined: not read yet). */
let read: Buffer | null | undefined;
/** A test's simulated boot (undefined: none; null: a machine without a boot id). */
let simulated: Buffer | null | undefined;

/** This boot's id, or null when the machine does not tell one. Read once; never throws. */
export function bootId(): Buffer | null {
  if (simulated !== undefined) return simulated;
  if (read === undefined) read = readBootId(BOOT_ID_FILE);
  return read;
}

/** The 16 bytes of the UUID in `file`, or null when it is missing, unreadable or not a UUID. */
function readBootId(file: string): Buffer | null {
  try {
    const text = fs.readFileSync(file, "latin1").trim().toLowerCase();
    if (!UUID.test(text)) return null;
    const id = Buffer.from(text.replaceAll("-", ""), "hex");
    return id.length === BOOT_ID_BYTES ? id : null;
  } catch {
    return null;
  }
}

/**
 * Test only: makes bootId() answer `id` (a simulated reboot: the power-loss harnesses open each
 * image under a new id), null (a machine without one), or the real id again (undefined).
 */
export function simulateBootForTests(id: Buffer | null | undefined): void {
  if (id !== null && id !== undefined && id.length !== BOOT_ID_BYTES) throw new RangeError(`a boot id is ${BOOT_ID_BYTES} bytes`);
  simulated = id === null || id === undefined ? id : Buffer.from(id);
}
