// @fugu/local-services: the project's own Redis and Postgres for a workstation (start, stop, reachability) and the local process supervisor
export {};
