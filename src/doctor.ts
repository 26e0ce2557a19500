/**
 * `penstock/doctor`: why reads take the route they take. The CUDA driver and cuFile as penstock
 * found them (`penstock info`), and the doctor's report (`penstock doctor`): the route each path's
 * device reads will take, why, and what to change.
 *
 * @packageDocumentation
 */
export { runtimeInfo } from './engine/process.js';
export type { CudaStatus, CuFileStatus, CuFileDriverProps } from './addon/binding.js';
export {
  diagnose, readGdscheck, render as renderDoctorReport,
  type Check, type CheckStatus, type DiagnoseOptions, type DoctorReport, type Finding, type PathReport, type PlatformFacts, type PredictedRoute,
  type Prediction, type ProbeResult, type ShapePrediction, type GdscheckReport,
} from './doctor/index.js';
