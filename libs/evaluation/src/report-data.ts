// What a run's report shows, as collectRunSummary gathers it: the input of @fugu/report's
// renderEvalReport, declared once, there.
export type { EvalReportData } from '@fugu/report';
