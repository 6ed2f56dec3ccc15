/**
 * The README's integration snippets, type-checked by `tsc -p tsconfig.test.json` (so they stay
 * working as the APIs change) but never run: the Claude loop needs the network and a key.
 */
import Anthropic from "@anthropic-ai/sdk";
import { betaMemoryTool } from "@anthropic-ai/sdk/tools/memory/node";
import { Annotation, START, StateGraph } from "@langchain/langgraph";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { Engram } from "../../src/index.js";
import { EngramStore } from "../../src/integrations/langgraph.js";
import { EngramMemoryTool } from "../../src/integrations/memory-tool.js";

/** README "LangGraph store". */
export async function langgraphSnippet(): Promise<void> {
  const engram = await Engram.open("./memory");
  const store = new EngramStore(engram, { scope: "langgraph" });

  await store.put(["users", "alice"], "prefs", { theme: "dark" });
  const item = await store.get(["users", "alice"], "prefs"); // { value, key, namespace, createdAt, updatedAt }
  const hits = await store.search(["users"], { filter: { theme: "dark" }, limit: 5 });

  const State = Annotation.Root({ question: Annotation<string>(), answer: Annotation<string>() });
  const graph = new StateGraph(State)
    .addNode("answer", async (state: typeof State.State, config: LangGraphRunnableConfig) => {
      const ns = ["users", String(config.configurable?.["user_id"])];
      const prefs = await config.store?.get(ns, "prefs");
      await config.store?.put(ns, "last_question", { text: state.question });
      return { answer: `theme is ${String(prefs?.value["theme"] ?? "unknown")}` };
    })
    .addEdge(START, "answer")
    .compile({ store });
  await graph.invoke({ question: "what theme?" }, { configurable: { thread_id: "t1", user_id: "alice" } });
  void item;
  void hits;
  await engram.close();
}

/** README "Claude's memory tool". */
export async function memoryToolSnippet(): Promise<void> {
  const engram = await Engram.open("./memory");
  const memory = new EngramMemoryTool(engram, { scope: "user:alice" });
  const client = new Anthropic(); // ANTHROPIC_API_KEY from the environment

  // The SDK's tool runner is the tool-use loop: it sends the request, runs every memory command
  // Claude issues against engram, sends the results back, and stops at Claude's final answer.
  const final = await client.beta.messages.toolRunner({
    model: "claude-sonnet-4-5",
    max_tokens: 2048,
    messages: [{ role: "user", content: "I prefer dark mode. Remember that for next time." }],
    tools: [betaMemoryTool(memory)],
  });
  for (const block of final.content) if (block.type === "text") console.log(block.text);

  await engram.forgetScope("user:alice", { reclaim: "eager" }); // erase the whole memory, bytes gone from disk
  await engram.close();
}

/** README "Backup, export and import". */
export async function backupSnippet(): Promise<void> {
  const engram = await Engram.open("./memory");
  const report = await engram.backup("./memory-backup-2026-12-01"); // online; engram keeps serving
  console.log(report.segments, report.linked, report.verify.ok);
  await engram.close();
}
