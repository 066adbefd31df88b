"""The inference gateway: the OpenAI API in test mode, routing to operators' workers, pricing,
budgets, receipts and on-chain settlement."""
