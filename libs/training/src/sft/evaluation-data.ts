// What a router evaluation measures (evaluateRouter, routerStudy): the input of @fugu/report's
// renderRouterReport, declared once, there.
export type { MethodResult as RouterMethodResult, RouterReportData as RouterEvaluation } from '@fugu/report';
