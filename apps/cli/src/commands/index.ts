// The command groups of `fugu`, one module each, in the order `fugu --help` lists them. A new
// group is a module exporting a CommandGroup, added here.
import type { CommandGroup } from '../cli.ts';
import { evalCommands } from './eval.ts';
import { requestsCommands } from './requests.ts';
import { routerCommands } from './router.ts';
import { servicesCommands } from './services.ts';
import { servingCommands } from './serving.ts';
import { trainCommands } from './train.ts';
import { registerUltraPolicy } from './ultra-policy.ts';

// TEMP: until the ultra group (ultra.ts) calls registerUltraPolicy itself
const ultraPolicyTemp: CommandGroup = (program, cli) => registerUltraPolicy(program.command('ultra').description('fugu-ultra: the Conductor'), cli);

export const COMMAND_GROUPS: readonly CommandGroup[] = [servicesCommands, evalCommands, routerCommands, trainCommands, servingCommands, requestsCommands, ultraPolicyTemp];
