// The command groups of `fugu`, one module each, in the order `fugu --help` lists them. A new
// group is a module exporting a CommandGroup, added here.
import type { CommandGroup } from '../cli.ts';
import { batchCommands } from './batch.ts';
import { evalCommands } from './eval.ts';
import { multistepCommands } from './multistep.ts';
import { requestsCommands } from './requests.ts';
import { routerCommands } from './router.ts';
import { servicesCommands } from './services.ts';
import { servingCommands } from './serving.ts';
import { trainCommands } from './train.ts';
import { ultraCommands } from './ultra.ts';

export const COMMAND_GROUPS: readonly CommandGroup[] = [servicesCommands, evalCommands, routerCommands, trainCommands, servingCommands, requestsCommands, batchCommands, ultraCommands, multistepCommands];
