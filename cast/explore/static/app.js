// The Conversation Explorer page. It only uses the JSON API under /api, and sets every text from the server
// (passages, utterances, answers, entity names) with textContent, never as HTML.
"use strict";

const PARAM_NAMES = ["method", "gamma", "tau", "path_bonus", "reranker", "generator", "words"];
const NUMBER_PARAMS = new Set(["gamma", "tau", "path_bonus", "words"]);
const STAGE_OF_SETTING = { gamma: "method", tau: "method", path_bonus: "method", words: "generator" };
const POLL_MS = 250;

const state = {
  options: null,
  conversation: null, // the conversation view from the API
  turn: null, // the selected turn number (1-based)
  request: 0, // increases with each turn request, so that late answers to older requests are dropped
  recomputeTimer: null,
};

function $(id) {
  return document.getElementById(id);
}

// An element with text content and attributes; children are elements or strings (set as text nodes).
function el(tag, { text, cls, attrs } = {}, children = []) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, String(value));
  for (const child of children) node.append(child);
  return node;
}

class ApiError extends Error {
  constructor(status, body) {
    super(body && body.error ? body.error : `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

async function api(path, options = {}) {
  const init = { headers: { Accept: "application/json" }, ...options };
  if (options.json !== undefined) {
    init.method = init.method || "POST";
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(options.json);
  }
  const response = await fetch(path, init);
  let body = null;
  try {
    body = await response.json();
  } catch (_) {
    body = { error: `the server answered HTTP ${response.status} without JSON` };
  }
  if (!response.ok) throw new ApiError(response.status, body);
  return { status: response.status, body };
}

// --- status and errors ---------------------------------------------------------------------------------------

function showStatus(text, busy) {
  $("status-text").textContent = text;
  $("spinner").hidden = !busy;
  document.body.classList.toggle("busy", Boolean(busy));
}

function showError(error) {
  const box = $("error");
  box.replaceChildren(el("strong", { text: error.status ? `Error (HTTP ${error.status}): ` : "Error: " }));
  box.append(String(error.message || error));
  box.hidden = false;
  showStatus("", false);
}

function clearError() {
  $("error").hidden = true;
  $("error").replaceChildren();
}

// --- parameters ------------------------------------------------------------------------------------------------

function fillSelect(select, names) {
  select.replaceChildren(...names.map((name) => el("option", { text: name, attrs: { value: name } })));
}

function setParams(params) {
  for (const name of PARAM_NAMES) {
    const input = $(`param-${name}`);
    input.value = params[name] === null || params[name] === undefined ? "" : String(params[name]);
  }
  updateApplicable();
}

// Disable the settings the chosen stages do not take (e.g. γ for a generator-only change, words for seq2seq).
function updateApplicable() {
  const settings = state.options.settings;
  for (const [setting, stageParam] of Object.entries(STAGE_OF_SETTING)) {
    const stageName = $(`param-${stageParam}`).value;
    const takes = (settings[stageParam][stageName] || []).includes(setting);
    const input = $(`param-${setting}`);
    input.disabled = !takes;
    input.title = takes ? "" : `${stageName} does not use this setting`;
  }
}

function currentParams() {
  const params = {};
  for (const name of PARAM_NAMES) {
    const input = $(`param-${name}`);
    if (input.disabled || input.value === "") continue;
    params[name] = NUMBER_PARAMS.has(name) ? Number(input.value) : input.value;
  }
  return params;
}

function paramsSummary(params, ignored) {
  const parts = [`method ${params.method}`];
  if (params.gamma !== null) parts.push(`γ ${params.gamma}`);
  if (params.tau !== null) parts.push(`τ ${params.tau}`);
  if (params.path_bonus !== null) parts.push(`EP β ${params.path_bonus}`);
  parts.push(`re-ranker ${params.reranker}`, `generator ${params.generator}`);
  if (params.words !== null) parts.push(`${params.words} words`);
  let text = `Settings: ${parts.join(" · ")}`;
  if (ignored && ignored.length) text += ` (not used by these stages: ${ignored.join(", ")})`;
  return text;
}

function scheduleRecompute() {
  clearTimeout(state.recomputeTimer);
  state.recomputeTimer = setTimeout(() => {
    if (state.turn) requestTurn(state.turn);
  }, 200);
}

// --- conversations ----------------------------------------------------------------------------------------------

async function loadConversations(selectId) {
  const { body } = await api("/api/conversations");
  const select = $("conversation-select");
  select.replaceChildren(
    ...body.conversations.map((c) =>
      el("option", { text: `${c.title} (${c.turns} turns)`, attrs: { value: c.id } }),
    ),
  );
  if (selectId) select.value = selectId;
  if (select.value) await openConversation(select.value);
}

async function openConversation(cid, turn) {
  clearError();
  const { body } = await api(`/api/conversations/${encodeURIComponent(cid)}`);
  state.conversation = body;
  $("conversation-description").textContent = body.description || "";
  $("add-turn-form").hidden = !body.editable;
  renderTurnList();
  const number = turn || (body.turns.length ? 1 : null);
  if (number) {
    selectTurn(number);
  } else {
    state.turn = null;
    $("turn-view").hidden = true;
    showStatus("Type the first question of the conversation.", false);
    $("new-utterance").focus();
  }
}

function renderTurnList() {
  const list = $("turn-list");
  list.replaceChildren(
    ...state.conversation.turns.map((turn) => {
      const button = el("button", { text: turn.utterance, cls: "turn", attrs: { type: "button" } });
      button.dataset.turn = String(turn.number);
      button.addEventListener("click", () => selectTurn(turn.number));
      return el("li", {}, [button]);
    }),
  );
}

function selectTurn(number) {
  state.turn = number;
  for (const button of $("turn-list").querySelectorAll("button.turn")) {
    button.classList.toggle("selected", button.dataset.turn === String(number));
  }
  requestTurn(number);
}

async function newConversation() {
  try {
    const { body } = await api("/api/conversations", { json: { title: null } });
    await loadConversations(body.id);
  } catch (error) {
    showError(error);
  }
}

async function addTurn(event) {
  event.preventDefault();
  const input = $("new-utterance");
  const utterance = input.value.trim();
  if (!utterance) return;
  try {
    const cid = state.conversation.id;
    const { body } = await api(`/api/conversations/${encodeURIComponent(cid)}/turns`, {
      json: { utterance },
    });
    input.value = "";
    const option = $("conversation-select").selectedOptions[0];
    if (option) option.textContent = `${body.title} (${body.turns.length} turns)`;
    state.conversation = body;
    renderTurnList();
    selectTurn(body.turns.length);
  } catch (error) {
    showError(error);
  }
}

// --- answering a turn -------------------------------------------------------------------------------------------

async function requestTurn(number) {
  const request = ++state.request;
  clearError();
  showStatus(`Answering turn ${number}…`, true);
  const payload = { conversation_id: state.conversation.id, turn: number, params: currentParams() };
  try {
    let { status, body } = await api("/api/jobs", { json: payload });
    while (status === 202) {
      if (request !== state.request) return;
      const stage = body.stage ? ` · ${body.stage}` : "";
      showStatus(`Answering turn ${body.turn} of ${body.total_turns}${stage} (${body.elapsed.toFixed(1)} s)`, true);
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      ({ status, body } = await api(`/api/jobs/${encodeURIComponent(body.job_id)}`));
    }
    if (request !== state.request) return;
    renderTurn(body);
    const took = body.cached ? "from the cache" : `in ${body.elapsed.toFixed(2)} s`;
    showStatus(`Turn ${number} answered ${took}.`, false);
  } catch (error) {
    if (request === state.request) showError(error);
  }
}

function fmt(value, digits = 3) {
  return value === null || value === undefined ? "–" : Number(value).toFixed(digits);
}

function renderTurn(job) {
  const view = job.result;
  $("turn-view").hidden = false;
  $("turn-title").textContent = `Turn ${view.number} · ${view.qid}`;
  $("utterance").textContent = view.utterance;
  $("rewrite").textContent = view.rewrite.query;
  $("rewrite-method").textContent = `(${view.rewrite.method})`;
  $("response").textContent = view.response || "";
  for (const node of document.querySelectorAll(".query .response")) node.hidden = !view.response;
  renderAnswer(view);
  $("answer-params").textContent = paramsSummary(job.params, job.ignored);
  renderEvaluation(view.evaluation);
  renderGraph(view);
  renderSelection(view.selection);
  renderChosen(view);
  renderPassages(view);
  $("timings").textContent = Object.entries(view.timings)
    .map(([stage, seconds]) => `${stage} ${seconds.toFixed(3)} s`)
    .join(" · ");
}

function renderAnswer(view) {
  const answer = $("answer");
  const chosenOrder = view.chosen.map((p) => p.id);
  const sentences = view.answer.sentences.length
    ? view.answer.sentences
    : [{ text: view.answer.text, passage_id: null }];
  answer.replaceChildren();
  // Claims the verifier kept although unsupported (unsupported: mark) are marked in the answer too.
  const unsupported = new Set(
    (view.verification ? view.verification.claims : []).filter((c) => !c.supported).map((c) => c.text),
  );
  for (const sentence of sentences) {
    const span = el("span", { text: sentence.text, cls: "sentence" });
    if (unsupported.has(sentence.text)) {
      span.classList.add("unsupported");
      span.title = "the verifier found no support for this sentence in its passage";
    }
    if (sentence.passage_id) {
      span.classList.add("linked");
      span.dataset.passage = sentence.passage_id;
      const position = chosenOrder.indexOf(sentence.passage_id) + 1;
      const marker = el("sup", { text: `[${position || sentence.passage_id}]`, cls: "source" });
      span.append(marker);
      span.title = `from passage ${sentence.passage_id}`;
      span.tabIndex = 0;
      span.addEventListener("mouseenter", () => highlightPassages([sentence.passage_id]));
      span.addEventListener("mouseleave", () => highlightPassages([]));
      span.addEventListener("click", () => focusPassage(sentence.passage_id));
    }
    answer.append(span, " ");
  }
  const words = view.answer.text.split(/\s+/).filter(Boolean).length;
  let meta = `${words} words by ${view.answer.generator}, from passages ${view.answer.source_ids.join(", ")}`;
  if (view.answer.no_answer_reason) meta += ` — no answer: ${view.answer.no_answer_reason}`;
  $("answer-meta").textContent = meta;
  renderClaims(view.verification);
}

function renderClaims(verification) {
  const list = $("claims");
  list.replaceChildren();
  list.hidden = !verification;
  if (!verification) return;
  const relevance = verification.relevance === null ? "-" : verification.relevance.toFixed(2);
  list.append(
    el("li", {
      cls: "claims-head muted",
      text: verification.abstained
        ? `${verification.verifier} withheld the generated answer ("${verification.original_text}"): ${verification.reason}`
        : `${verification.verifier}: each claim against the passage it cites (best passage's relevance ${relevance})`,
    }),
  );
  for (const claim of verification.claims) {
    const verdict = claim.supported ? "supported" : "unsupported";
    const fate = claim.kept ? "" : ", dropped";
    list.append(
      el("li", { cls: `claim ${verdict}${claim.kept ? "" : " dropped"}` }, [
        el("span", { text: claim.text }),
        el("span", {
          cls: "muted",
          text: ` — support ${claim.support.toFixed(2)} by ${claim.passage_id || "no passage"} (${verdict}${fate})`,
        }),
      ]),
    );
  }
}

function renderEvaluation(evaluation) {
  const box = $("evaluation");
  box.replaceChildren();
  if (!evaluation) {
    box.append(el("p", { cls: "muted", text: "No qrels or written response for this turn." }));
    return;
  }
  const list = el("ul");
  if (evaluation.retrieval) {
    const parts = Object.entries(evaluation.retrieval).map(([name, value]) => `${name} ${fmt(value, 4)}`);
    list.append(el("li", { text: `Ranking: ${parts.join(" · ")}` }));
  }
  if (evaluation.chosen_grades) {
    const grades = Object.entries(evaluation.chosen_grades).map(
      ([pid, grade]) => `${pid}: ${grade === null ? "unjudged" : grade}`,
    );
    list.append(el("li", { text: `Judged grades of the chosen passages: ${grades.join(", ")}` }));
  }
  if (evaluation.answer) {
    const parts = Object.entries(evaluation.answer).map(([name, value]) => `${name} ${fmt(value, 2)}`);
    list.append(el("li", { text: `Answer vs the written response: ${parts.join(" · ")}` }));
  }
  if (evaluation.answer_error) list.append(el("li", { cls: "warning", text: evaluation.answer_error }));
  box.append(list);
}

function renderGraph(view) {
  const graph = view.graph;
  const caption = $("graph-caption");
  if (!graph.nodes.length) {
    caption.textContent =
      view.selection.method === "o"
        ? "No entities: method O links entities only with the EP path bonus or the density filter."
        : "No entities were linked in the query or the candidate passages.";
  } else {
    const sizes = graph.ranked_by ? `sized by ${graph.ranked_by}` : "not ranked by this method";
    const edges = graph.edges.length ? `${graph.edges.length} edges kept` : "no edges kept";
    caption.textContent = `${graph.nodes.length} entities, ${sizes}; ${edges}. Drag nodes; click one to mark its passages.`;
  }
  $("graph").toggleAttribute("hidden", !graph.nodes.length);
  $("graph-legend").hidden = !graph.nodes.length;
  window.EntityGraph.draw($("graph"), graph, {
    onSelect: (node) => highlightPassages(node ? node.passages : []),
  });
  window.EntityGraph.legend($("graph-legend"));
}

function renderSelection(selection) {
  const items = [el("li", { text: `Method ${selection.method}` })];
  if (selection.fallback) items.push(el("li", { cls: "warning", text: `Fell back: ${selection.fallback}` }));
  if (selection.focus_entity) items.push(el("li", { text: `Focus entity: ${shortEntity(selection.focus_entity)}` }));
  if (selection.top_entities.length) {
    const top = selection.top_entities.map(([entity, rank]) => `${shortEntity(entity)} ${fmt(rank, 3)}`);
    items.push(el("li", { text: `Top entities: ${top.join(", ")}` }));
  }
  if (selection.path) {
    const chains = Object.entries(selection.path.chains).map(([pid, chain]) =>
      chain ? `${pid}: ${chain.map(shortEntity).join(" → ")}` : `${pid}: unreachable`,
    );
    items.push(el("li", { text: `Entity paths (EP) from ${selection.path.focus ? shortEntity(selection.path.focus) : "no focus entity"}: ${chains.join("; ")}` }));
  }
  if (selection.density_filter) {
    const kept = Object.entries(selection.density_filter).map(
      ([pid, report]) => `${pid}: kept ${report.kept}, dropped ${report.dropped}`,
    );
    items.push(el("li", { text: `Entity-density filter: ${kept.join("; ")}` }));
  }
  $("selection").replaceChildren(...items);
}

function renderChosen(view) {
  $("chosen").replaceChildren(
    ...view.chosen.map((passage) => {
      const item = el("li", {}, [el("strong", { text: passage.title || passage.id })]);
      item.append(passage.title ? ` (${passage.id}) ` : " ", el("span", { text: passage.text }));
      item.dataset.passage = passage.id;
      return item;
    }),
  );
}

function renderPassages(view) {
  const body = $("passages").querySelector("tbody");
  body.replaceChildren(
    ...view.passages.map((p) => {
      const row = el("tr");
      row.dataset.passage = p.id;
      if (p.chosen) row.classList.add("chosen");
      const title = el("td", {}, [el("div", { text: p.title || "", cls: "title" }), el("code", { text: p.id })]);
      if (p.entities.length) title.append(el("div", { cls: "entities", text: p.entities.map(shortEntity).join(", ") }));
      const text = el("td", { cls: "text" }, [
        el("details", {}, [el("summary", { text: p.text.slice(0, 140) + (p.text.length > 140 ? "…" : "") }), p.text]),
      ]);
      let selection = fmt(p.selection_score);
      if (p.path_bonus) selection += ` (EP +${fmt(p.path_bonus)})`;
      row.append(
        el("td", { text: p.rank }),
        title,
        el("td", { text: `${p.first_stage_rank ?? "–"} · ${fmt(p.first_stage_score)}` }),
        el("td", { text: fmt(p.reranked_score) }),
        el("td", { text: selection }),
        el("td", { text: p.chosen ? `✓ ${p.chosen}` : "" }),
        el("td", { text: p.relevance === null ? "–" : p.relevance }),
        text,
      );
      return row;
    }),
  );
}

function shortEntity(entity) {
  const name = entity.replace(/\/+$/, "").split("/").pop();
  try {
    return decodeURIComponent(name).replaceAll("_", " ");
  } catch (_) {
    return name;
  }
}

function highlightPassages(ids) {
  const wanted = new Set(ids);
  for (const node of document.querySelectorAll("[data-passage]")) {
    if (node.classList.contains("sentence")) continue;
    node.classList.toggle("highlight", wanted.has(node.dataset.passage));
  }
}

function focusPassage(pid) {
  highlightPassages([pid]);
  for (const row of $("passages").querySelectorAll("tr[data-passage]")) {
    if (row.dataset.passage === pid) row.scrollIntoView({ behavior: "smooth", block: "center" });
  }
}

// --- start ------------------------------------------------------------------------------------------------------

async function start() {
  try {
    const { body: options } = await api("/api/options");
    state.options = options;
    $("config-info").textContent = `config ${options.tag} · index ${options.index}`;
    for (const param of ["method", "reranker", "generator"]) {
      fillSelect($(`param-${param}`), Object.keys(options.settings[param]));
    }
    setParams(options.defaults);
    $("params-form").addEventListener("change", () => {
      updateApplicable();
      scheduleRecompute();
    });
    $("params-form").addEventListener("submit", (event) => {
      event.preventDefault();
      scheduleRecompute();
    });
    $("reset-params").addEventListener("click", () => {
      setParams(options.defaults);
      scheduleRecompute();
    });
    $("conversation-select").addEventListener("change", (event) => openConversation(event.target.value));
    $("new-conversation").addEventListener("click", newConversation);
    $("add-turn-form").addEventListener("submit", addTurn);
    await loadConversations();
  } catch (error) {
    showError(error);
  }
}

document.addEventListener("DOMContentLoaded", start);
