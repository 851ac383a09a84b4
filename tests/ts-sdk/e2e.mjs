// The bridge through the official MCP TypeScript SDK client (the SDK most hosts are built on:
// the MCP Inspector, Claude Code, VS Code). Run by tests/suite/ts_sdk.rs, which starts the mock
// Responses API, queues its replies in the order of the calls below, and checks the summary.
//
// Input (environment):
//   BRIDGE_BIN   the built codex-mcp-bridge binary
//   BRIDGE_ENV   a JSON object: the bridge's whole environment (real codex, mock, roots, store)
//   BRIDGE_CWD   the bridge's working directory
//   WORK_DIR     a git repository inside the allowed roots, with an uncommitted change
//
// Output: one JSON line on stdout, the summary; exit code 0 when every check passed, else 1 with
// the reasons on stderr (and the bridge's stderr).
//
// The SDK's own checks stay on: `listTools` compiles every output schema with the SDK's Ajv
// (which warns about unknown formats), and `callTool` validates `structuredContent` against the
// tool's output schema, error results included. The input schemas are compiled with the same
// validator, as hosts do before they call. Every console warning or error fails the run.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { ResourceListChangedNotificationSchema, ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

const warnings = [];
for (const level of ['warn', 'error']) {
    console[level] = (...args) => warnings.push(`console.${level}: ${args.map(String).join(' ')}`);
}
process.on('warning', (w) => warnings.push(`process warning: ${w.name}: ${w.message}`));

const failures = [];
const check = (ok, what) => {
    if (!ok) failures.push(what);
    return ok;
};

const env = JSON.parse(process.env.BRIDGE_ENV ?? '{}');
const work = process.env.WORK_DIR;
const CALL_TIMEOUT_MS = 180_000;

const transport = new StdioClientTransport({
    command: process.env.BRIDGE_BIN,
    args: [],
    env,
    cwd: process.env.BRIDGE_CWD,
    stderr: 'pipe',
});
let bridgeStderr = '';
transport.stderr?.on('data', (d) => {
    bridgeStderr += d.toString();
});

const client = new Client({ name: 'codex-mcp-bridge-ts-sdk-e2e', version: '0' });
const summary = { tools: [], warnings, calls: [] };
const updated = [];
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
    updated.push(n.params.uri);
});
let listChanged = 0;
client.setNotificationHandler(ResourceListChangedNotificationSchema, () => {
    listChanged += 1;
});

// A request other than a tool call; what it threw is a failure, named by `what`.
async function request(what, run) {
    try {
        return await run();
    } catch (e) {
        failures.push(`${what}: the SDK threw: ${e?.message ?? e}`);
        return undefined;
    }
}

// One tool call through the SDK. `result` is what the SDK returned, `thrown` what it threw
// (a schema mismatch surfaces here as "Structured content does not match ...").
async function call(name, args) {
    const entry = { tool: name, arguments: args };
    try {
        const r = await client.callTool({ name, arguments: args }, undefined, {
            timeout: CALL_TIMEOUT_MS,
        });
        entry.isError = r.isError === true;
        entry.text = (r.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
        entry.structured = r.structuredContent ?? null;
    } catch (e) {
        entry.thrown = String(e?.message ?? e);
    }
    summary.calls.push(entry);
    return entry;
}

function expectOk(entry, extra = () => true) {
    const what = `${entry.tool} ${JSON.stringify(entry.arguments)}`;
    if (!check(entry.thrown === undefined, `${what}: the SDK threw: ${entry.thrown}`)) return;
    if (!check(!entry.isError, `${what}: error result: ${entry.text}`)) return;
    check(extra(entry), `${what}: unexpected result: ${JSON.stringify(entry.structured)}`);
}

function expectError(entry, sentence) {
    const what = `${entry.tool} ${JSON.stringify(entry.arguments)}`;
    if (!check(entry.thrown === undefined, `${what}: the SDK threw instead of returning the error: ${entry.thrown}`)) return;
    if (!check(entry.isError, `${what}: expected an error result, got: ${entry.text}`)) return;
    check(entry.text.includes(sentence), `${what}: the error does not say \`${sentence}\`: ${entry.text}`);
}

try {
    await client.connect(transport);
    summary.server = client.getServerVersion();

    const { tools } = await client.listTools();
    summary.tools = tools.map((t) => t.name);
    const ajv = new AjvJsonSchemaValidator();
    for (const t of tools) {
        ajv.getValidator(t.inputSchema);
    }

    // successes, in the order the mock's replies were queued
    const ping = await call('ping', {});
    expectOk(ping, (e) => e.structured?.codexVersionMatches === true);
    const turn = await call('codex', { prompt: 'remember KESTREL', workingDirectory: work });
    expectOk(turn, (e) => e.structured?.response === 'first answer' && !!e.structured?.sessionId);
    const sessionId = turn.structured?.sessionId ?? 'missing';
    expectOk(await call('listSessions', { limit: 5 }), (e) => e.structured?.sessions?.length === 1);
    expectOk(await call('getSession', { sessionId }), (e) => e.structured?.found === true);
    expectOk(await call('query', { prompt: '2+2?' }), (e) => e.structured?.response === '4');
    expectOk(await call('search', { query: 'rust 2024 edition' }), (e) => e.structured?.response === 'the web says hi');
    expectOk(
        await call('structured', {
            prompt: 'the answer?',
            schema: { type: 'object', properties: { answer: { type: 'integer' } }, required: ['answer'], additionalProperties: false },
        }),
        (e) => e.structured?.data?.answer === 42,
    );
    expectOk(await call('review', { workingDirectory: work }), (e) => e.structured?.findings?.[0]?.priority === 'P1');
    // a turn that fails at the API: a structured error result that keeps the turn's shape
    const refused = await call('codex', { prompt: 'please fail', workingDirectory: work });
    expectError(refused, 'the mock refuses this prompt');
    check(refused.structured?.error?.kind !== undefined, `codex failure: no error kind: ${JSON.stringify(refused.structured)}`);

    // fork the session; steer a running turn of it (retried until the turn runs)
    const forked = await call('forkSession', { sessionId });
    expectOk(forked, (e) => e.structured?.forkedFrom === sessionId && !!e.structured?.sessionId && e.structured?.sessionId !== sessionId);
    const running = call('codex', { prompt: 'a long task', sessionId });
    let steered;
    for (let i = 0; i < 50; i++) {
        await new Promise((r) => setTimeout(r, 200));
        steered = await call('steer', { sessionId, prompt: 'STEER: say hello' });
        if (!steered.isError) break;
    }
    expectOk(steered, (e) => e.structured?.steered === true);
    expectOk(await running, (e) => e.structured?.steered?.[0] === 'STEER: say hello');
    // take the session back by one turn: its view counts the dropped turn
    expectOk(
        await call('rewindSession', { sessionId, turns: 1 }),
        (e) => e.structured?.dropped === 1 && e.structured?.session?.droppedTurns === 1,
    );
    // compact the session: its view counts the compaction
    expectOk(await call('compactSession', { sessionId }), (e) => e.structured?.session?.compactions === 1);
    // name the session: the name and the hand-off come back in its view
    expectOk(
        await call('renameSession', { sessionId, name: 'SDK session' }),
        (e) => e.structured?.session?.name === 'SDK session' && (e.structured?.session?.handOff ?? '').includes(' resume -C '),
    );
    // the prompts (slash commands): listed, and each message names its tool with the
    // person's values as quoted JSON
    const prompts = await request('listPrompts', () => client.listPrompts());
    summary.prompts = (prompts?.prompts ?? []).map((p) => p.name);
    check(summary.prompts.join() === 'review,delegate,status,continue', `listPrompts: ${summary.prompts}`);
    const cont = await request('getPrompt continue', () =>
        client.getPrompt({ name: 'continue', arguments: { sessionId, prompt: 'say "go on"' } }),
    );
    const contText = cont?.messages?.[0]?.content?.text ?? '';
    check(contText.includes('`codex`') && contText.includes(`"prompt":${JSON.stringify('say "go on"')}`) && contText.includes(`"sessionId":"${sessionId}"`), `getPrompt continue: ${contText}`);
    const badPrompt = await client.getPrompt({ name: 'delegate', arguments: { task: 'a\u0007b' } }).then(
        () => 'answered',
        (e) => String(e?.message ?? e),
    );
    check(badPrompt.includes('invalid argument `task`'), `getPrompt delegate with a control character: ${badPrompt}`);
    // the session as a resource of this client's home: its making changed the list (an `@`
    // mention list follows), it is listed, read, subscribed
    check(listChanged > 0, `no notifications/resources/list_changed after a session was made`);
    summary.listChanged = listChanged;
    const uri = `codex-session://${sessionId}`;
    const resources = await request('listResources', () => client.listResources());
    check((resources?.resources ?? []).some((r) => r.uri === uri), `listResources: ${JSON.stringify(resources)}`);
    const templates = await request('listResourceTemplates', () => client.listResourceTemplates());
    check(templates?.resourceTemplates?.[0]?.uriTemplate === 'codex-session://{sessionId}', `listResourceTemplates: ${JSON.stringify(templates)}`);
    const read = await request('readResource', () => client.readResource({ uri }));
    const record = JSON.parse(read?.contents?.[0]?.text ?? '{}');
    check(record.sessionId === sessionId && record.name === 'SDK session', `readResource: ${JSON.stringify(read)}`);
    await request('subscribeResource', () => client.subscribeResource({ uri }));
    // a turn in the background: the handle at once, then its result through `wait`
    expectOk(
        await call('codex', { prompt: 'in the background', sessionId, background: true }),
        (e) => e.structured?.status === 'running' && e.structured?.sessionId === sessionId,
    );
    let waited;
    for (let i = 0; i < 30; i++) {
        waited = await call('wait', { sessionId, waitSeconds: 5 });
        if (waited.structured?.status !== 'running') break;
    }
    expectOk(waited, (e) => e.structured?.status === 'completed' && e.structured?.response === 'background answer');
    // the notification is sent as the turn ends: it may come just after `wait`'s answer
    for (let i = 0; i < 50 && !updated.includes(uri); i++) await new Promise((r) => setTimeout(r, 100));
    check(updated.includes(uri), `no notifications/resources/updated for ${uri} after its turn: ${JSON.stringify(updated)}`);
    summary.updated = updated;
    // `stop` of a turn that already ended: its result, as `wait` read it
    expectOk(await call('stop', { sessionId }), (e) => e.structured?.status === 'completed' && e.structured?.response === 'background answer');
    // a session in a worktree of its own: its (empty) changes shown and applied, then closed
    const wt = await call('codex', { prompt: 'in a worktree', workingDirectory: work, worktree: true });
    expectOk(wt, (e) => e.structured?.response === 'worktree answer' && !!e.structured?.sessionId);
    const wtId = wt.structured?.sessionId ?? 'missing';
    expectOk(await call('diffSession', { sessionId: wtId }), (e) => Array.isArray(e.structured?.worktree?.files));
    expectOk(await call('applySession', { sessionId: wtId }), (e) => e.structured?.applied === true);
    expectOk(await call('closeSession', { sessionId: wtId }), (e) => e.structured?.closed === true);

    // bad arguments: every tool answers with its own sentence
    expectError(await call('listSessions', { limit: '2' }), 'invalid argument `limit`: invalid type: string "2", expected u32');
    expectError(await call('listSessions', { limit: 0 }), 'invalid argument `limit`: must be between 1 and 200');
    expectError(await call('getSession', { sessionId: 'a b' }), 'invalid argument `sessionId`');
    expectError(await call('closeSession', {}), 'invalid argument `sessionId`: missing field `sessionId`');
    expectError(await call('forkSession', {}), 'invalid argument `sessionId`: missing field `sessionId`');
    expectError(await call('diffSession', { sessionId, limit: 0 }), 'invalid argument `limit`: must be between 1 and 200');
    expectError(await call('applySession', {}), 'invalid argument `sessionId`: missing field `sessionId`');
    expectError(await call('renameSession', { sessionId, name: 'two\nlines' }), 'invalid argument `name`: must be one line');
    expectError(await call('rewindSession', { sessionId, turns: 0 }), 'invalid argument `turns`: must be between 1');
    expectError(await call('compactSession', {}), 'invalid argument `sessionId`: missing field `sessionId`');
    expectError(await call('steer', { sessionId }), 'invalid argument `prompt`: missing field `prompt`');
    expectError(await call('ping', { verbose: true }), 'invalid argument `verbose`');
    expectError(await call('wait', { sessionId, waitSeconds: 0 }), 'invalid argument `waitSeconds`: must be from 1 to 50');
    expectError(await call('stop', {}), 'invalid argument `sessionId`: give `sessionId`');
    expectError(await call('codex', { prompt: 5 }), 'invalid argument `prompt`');
    expectError(await call('query', { prompt: 'x', timeout: 0 }), 'invalid argument `timeout`');
    expectError(await call('search', {}), 'invalid argument `query`');
    expectError(await call('structured', { prompt: 'x', schema: 'not json {' }), 'invalid argument `schema`');
    expectError(await call('review', { workingDirectory: '/etc' }), 'invalid argument `workingDirectory`');
    // a model id with a control character: refused before anything starts (the mock counts no request)
    expectError(await call('codex', { prompt: 'x', model: 'gpt-5.5\nx', workingDirectory: work }), 'invalid argument `model`: must not contain a control character');
    expectError(await call('query', { prompt: 'x', model: 'gpt\u001b[2J' }), 'invalid argument `model`: must not contain a control character');

    expectOk(await call('closeSession', { sessionId }), (e) => e.structured?.closed === true);
    expectOk(await call('getSession', { sessionId }), (e) => e.structured?.found === false);
} catch (e) {
    failures.push(`the run stopped: ${e?.stack ?? e}`);
} finally {
    await client.close().catch(() => {});
}

check(warnings.length === 0, `${warnings.length} warnings were printed, first: ${[...new Set(warnings)].slice(0, 5).join(' | ')}`);
summary.failures = failures;
process.stdout.write(`${JSON.stringify(summary)}\n`);
if (failures.length > 0) {
    process.stderr.write(`ts-sdk e2e FAILED:\n- ${failures.join('\n- ')}\n--- bridge stderr ---\n${bridgeStderr}\n`);
    process.exitCode = 1;
}
