// sep-CMA-ES (diagonal CMA-ES, Ros & Hansen 2008) with CSA or two-point step-size adaptation.
// Pure computation on @fugu/core. See README.md for the formulas, defaults and the benchmark table.
export * from './sep-cma-es.ts';
export * from './functions.ts';
