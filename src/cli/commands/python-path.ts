/**
 * `penstock python-path`: the folder holding penstock_client.py, the Python client of
 * `penstock serve`, for `PYTHONPATH=$(penstock python-path)`.
 */
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { EXIT } from '../common.js';

/** The folder of the Python client in this installation. */
export function pythonClientDir(): string {
  // dist/src/cli/commands/ -> the package root's python/.
  return fileURLToPath(new URL('../../../../python', import.meta.url));
}

/** Runs `penstock python-path`. */
export async function runPythonPathCli(): Promise<number> {
  const dir = pythonClientDir();
  if (!fs.existsSync(`${dir}/penstock_client.py`)) {
    process.stderr.write(`penstock python-path: ${dir}/penstock_client.py is missing from this installation\n`);
    return EXIT.failure;
  }
  process.stdout.write(`${dir}\n`);
  return EXIT.ok;
}
