/**
 * The live CUDA and cuFile facts, asked of penstock's runtime. Loading the addon or the
 * libraries can fail in many ways on a broken machine; each failure becomes a fact.
 */
import { cudaStatus, deviceInfo, hasGpu } from '../addon/runtime.js';
import { cufileOpenPlan, loadCufile, openCufileToDescribe } from '../addon/cufile-driver.js';
import type { PlatformFacts } from './types.js';

export function liveFacts(): PlatformFacts {
  let cuda: PlatformFacts['cuda'];
  try {
    cuda = cudaStatus();
  } catch (err) {
    const message = (err as Error).message;
    return {
      cuda: { loaded: false, path: 'libcuda.so.1', initialized: false, error: message },
      gpus: [],
      cufile: { loaded: false, path: 'libcufile.so.0', driverOpen: false, statsLevel: 0, error: message },
      addonError: message,
    };
  }
  const gpus: PlatformFacts['gpus'] = [];
  if (hasGpu()) {
    for (let i = 0; i < (cuda.deviceCount ?? 0); i++) {
      try {
        gpus.push(deviceInfo(i));
      } catch {
        // A GPU that cannot describe itself is still counted by deviceCount; the report says so.
      }
    }
  }
  let cufile: PlatformFacts['cufile'];
  try {
    // Opened here to describe it where penstock's loads would open it too; where they would not,
    // neither does the doctor (the report says why).
    cufile = cufileOpenPlan().open === 'never' ? loadCufile() : openCufileToDescribe();
  } catch (err) {
    cufile = { loaded: false, path: 'libcufile.so.0', driverOpen: false, statsLevel: 0, error: (err as Error).message };
  }
  return { cuda, gpus, cufile };
}

