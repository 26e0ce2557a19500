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
export async function runPythonPathCli(argv: string[]): Promise<number> {
  if (argv.includes('-h') || argv.includes('--help')) {
    process.stdout.write('Usage: penstock python-path\n\nPrints the folder of penstock_client.py (the Python client of "penstock serve"):\n  PYTHONPATH=$(penstock python-path) python3 -c "import penstock_client"\n');
    return EXIT.ok;
  }
  if (argv.length > 0) {
    process.stderr.write(`penstock python-path: unexpected argument '${argv[0]}'\n`);
    return EXIT.usage;
  }
  const dir = pythonClientDir();
  if (!fs.existsSync(`${dir}/penstock_client.py`)) {
    process.stderr.write(`penstock python-path: ${dir}/penstock_client.py is missing from this installation\n`);
    return EXIT.failure;
  }
  process.stdout.write(`${dir}\n`);
  return EXIT.ok;
}
