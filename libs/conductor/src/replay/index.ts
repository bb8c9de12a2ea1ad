// The offline (replay) environment's step model. See ./README.md.
export * from './params.ts';
export * from './model.ts';
export * from './calibrate.ts';
export * from './request.ts';
export * from './search.ts';
