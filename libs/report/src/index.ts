// @fugu/report: HTML reports and the SVG chart kit
export {};
