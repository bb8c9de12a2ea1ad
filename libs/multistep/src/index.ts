export * from './types.ts';
export { observationsOf, stepOf, type NotAStep, type ObservationCounts, type StepObservation } from './observations.ts';
export { outOfSample, predictRound, splitHalves, STATISTICS, type OutOfSample, type Predicted, type RoundPrediction, type Statistic } from './out-of-sample.ts';
export { DEFAULT_TABLES_DIR, parseQuestion, readTable, readTables, writeTable } from './tables.ts';
export { FIT_ROUND, fitTable, formatFits, type GroupFit, type TableFit } from './fit.ts';
