// Runs once before the test files: nothing to start yet; services are checked by infra/quickstart.sh.
export default function setup(): void {}
