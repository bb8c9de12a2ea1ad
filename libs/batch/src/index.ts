export * from './files.ts';
export * from './lines.ts';
export * from './api.ts';
export * from './driver.ts';
export * from './workers.ts';
