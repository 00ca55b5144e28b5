SELECT jq_configure('bench', '{"starvation_limit": null}') IS NOT NULL;
