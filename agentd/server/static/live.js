// Keeps a page current while a job runs: polls /live for the home's stamp and, when it
// changed, fetches the page again and puts its <main> in place of this one's. Nothing
// in the fetched page runs: it is parsed as a document, and only its nodes are moved.
"use strict";

(() => {
  const body = document.body;
  const said = document.getElementById("live-status");
  const EVERY = 2000; // milliseconds between polls
  let stamp = body.dataset.stamp;
  let busy = false;

  // Someone typing in a form of the page keeps what they typed until they leave it.
  const typing = () => {
    const active = document.activeElement;
    return active && document.querySelector("main").contains(active) && active.matches("input, textarea, select");
  };

  async function refresh(now) {
    const answer = await fetch(location.href, { cache: "no-store" });
    const page = new DOMParser().parseFromString(await answer.text(), "text/html");
    const main = page.querySelector("main");
    if (!main) return;
    document.querySelector("main").replaceWith(document.adoptNode(main));
    document.title = page.title;
    stamp = page.body.dataset.stamp || now;
    said.textContent = `live · updated ${new Date().toLocaleTimeString()}`;
  }

  async function poll() {
    if (busy || document.hidden || typing()) return;
    busy = true;
    try {
      const now = (await (await fetch(body.dataset.live, { cache: "no-store" })).json()).stamp;
      if (now !== stamp) await refresh(now);
      said.classList.remove("down");
    } catch (e) {
      said.textContent = "not updating: the daemon does not answer";
      said.classList.add("down");
    } finally {
      busy = false;
    }
  }

  setInterval(poll, EVERY);
})();
