export * from './types.ts';
export { observationsOf, stepOf, type NotAStep, type ObservationCounts, type StepObservation } from './observations.ts';
export { outOfSample, predictRound, splitHalves, STATISTICS, type OutOfSample, type Predicted, type RoundPrediction, type Statistic } from './out-of-sample.ts';
