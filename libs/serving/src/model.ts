// The router model runtime lives in @fugu/router-model (loadRouterModel, the execution-provider
// choice); serving re-exports it so its callers keep one import.
export {
  CUDA_PROVIDER_LIBRARY,
  loadRouterModel,
  onnxBindingDir,
  resolveExecutionProvider,
  threadsPerSession,
  USE_LITE_BACKBONE,
  useLiteSvfLayer,
  type ExecutionProviderSetting,
  type ResolvedExecution,
  type RouterModel,
  type RouterModelOptions,
} from '@fugu/router-model';
