// fugu-ultra's multi-agent tool loop with the `openai` client, run to its final answer:
//
//   node examples/ultra-tool-loop.ts [BASE_URL]        (default http://127.0.0.1:8081/v1)
//
// against a gateway that serves fugu-ultra (`npm run demo` starts one on the scripted pool at
// port 8081; or `npx fugu gateway --pool scripted --port 8081 --auth none`). FUGU_API_KEY is the
// key when the gateway asks for one. The client offers one tool, get_weather, and answers the
// agents' calls itself (here from a table): the workflow's agents ask, the client runs the tool,
// the agents answer from its result. On the scripted pool the answers are simulations (the `fugu`
// object says so): the loop, the ids and the rows are real.
import OpenAI from 'openai';

const baseURL = process.argv[2] ?? process.env.FUGU_BASE_URL ?? 'http://127.0.0.1:8081/v1';
const client = new OpenAI({ baseURL, apiKey: process.env.FUGU_API_KEY ?? 'none', maxRetries: 2 });

const tools: OpenAI.ChatCompletionTool[] = [{
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string', description: 'the city' } }, required: ['city'] },
  },
}];
const WEATHER: Record<string, string> = { Paris: '14 C, light rain until the evening', Lyon: '19 C, sunny' };
const getWeather = (args: { city?: string }): string => WEATHER[args.city ?? ''] ?? `${args.city ?? 'that city'}: no data`;

const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Should I take an umbrella in Paris today? Check the weather.' }];
console.log(`fugu-ultra at ${baseURL}\nuser: ${messages[0]!.content as string}`);
for (let request = 1; request <= 8; request++) {
  const r = await client.chat.completions.create({ model: 'fugu-ultra', messages, tools });
  const m = r.choices[0]!.message;
  const fugu = (r as unknown as { fugu?: { workflow?: number; conductor?: string; steps?: Array<{ worker: string }> } }).fugu;
  const calls = (m.tool_calls ?? []).filter((c) => c.type === 'function');
  console.log(`request ${request}: workflow ${fugu?.workflow} (${fugu?.conductor}; steps on ${fugu?.steps?.map((s) => s.worker).join(', ')}): ${calls.length > 0 ? `${calls.length} tool call(s)` : 'the final answer'}`);
  if (calls.length === 0) {
    console.log(`assistant: ${m.content}`);
    process.exit(0);
  }
  messages.push(m);
  for (const c of calls) {
    const result = getWeather(JSON.parse(c.function.arguments) as { city?: string });
    console.log(`  tool ${c.function.name}(${c.function.arguments}) -> ${result}`);
    messages.push({ role: 'tool', tool_call_id: c.id, content: result });
  }
}
console.error('no final answer after 8 requests');
process.exit(1);
