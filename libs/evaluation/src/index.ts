// @fugu/evaluation: evaluation batches: plan, enqueue, follow, summarise, soft labels
export {};
