// @fugu/report: HTML reports and the SVG chart kit. Every report renders data handed to it
// (the drivers in @fugu/evaluation and @fugu/training gather it); nothing here does I/O.
export * from './svg.ts';
export * from './page.ts';
export * from './eval-report.ts';
export * from './router-report-data.ts';
export * from './conductor-report-data.ts';
export * from './router-report.ts';
export * from './conductor-report.ts';
export * from './es-report.ts';
export { exampleEvalReportData } from './example.ts';
export { exampleRouterReportData } from './router-report-example.ts';
export { exampleConductorReportData } from './conductor-report-example.ts';
export * from './grpo-report.ts';
export * from './batch-report.ts';
export * from './multistep-report.ts';
export * from './session-report.ts';
