// Errors as stored in a call row and returned to a chat-call's waiter: the one wire format of
// @fugu/core (`{ code, message, name?, fields? }`, keyed on the code; providers register the
// reviver of their `provider-*` codes), re-exported here for the callers of libs/calls.
export { fromWireError, isWireError, toWireError, type WireError } from '@fugu/core';
