// @fugu/calls: the one call pipeline for every model call (request hash, response cache, shared rate limits, provider adapter, exact cost, call row)
export {};
