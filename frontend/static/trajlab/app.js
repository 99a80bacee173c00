// Minimal viewer: lists videos and jobs, plays frames with the proposal boxes drawn.
// Talks only to the REST API (session auth).
(function () {
  const $ = (sel) => document.querySelector(sel);
  const api = async (path) => {
    const r = await fetch(path, { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (!r.ok) throw new Error(`${path}: ${r.status}`);
    return r.json();
  };
  // Table rows are built from text nodes only: names and messages are user data.
  const row = (cells) => {
    const tr = document.createElement("tr");
    cells.forEach((text) => { const td = document.createElement("td"); td.textContent = String(text); tr.appendChild(td); });
    return tr;
  };
  const palette = ["#f43f5e", "#22c55e", "#3b82f6", "#eab308", "#a855f7", "#14b8a6", "#f97316", "#ec4899"];
  const state = { video: null, pool: [], frame: 0, playing: false, image: new Image(), timer: null, selected: null };
  const canvas = $("#canvas"), ctx = canvas.getContext("2d");

  function boxAt(t, f) {
    let lo = 0, hi = t.frames.length - 1;
    while (lo <= hi) { const mid = (lo + hi) >> 1; const v = t.frames[mid];
      if (v === f) return t.boxes[mid]; if (v < f) lo = mid + 1; else hi = mid - 1; }
    return null;
  }
  function draw() {
    const v = state.video; if (!v) return;
    const scale = canvas.width / v.width;
    ctx.drawImage(state.image, 0, 0, canvas.width, canvas.height);
    ctx.lineWidth = 2; ctx.font = "12px system-ui";
    state.pool.forEach((t, i) => {
      const b = boxAt(t, state.frame); if (!b) return;
      const c = palette[t.id % palette.length];
      ctx.strokeStyle = c; ctx.lineWidth = state.selected === t.id ? 4 : 2;
      ctx.strokeRect(b[0] * scale, b[1] * scale, (b[2] - b[0]) * scale, (b[3] - b[1]) * scale);
      ctx.fillStyle = c; ctx.fillText(`#${t.id}`, b[0] * scale + 2, b[1] * scale - 3);
    });
    $("#frame-label").textContent = `${state.frame + 1} / ${v.frame_count}`;
    $("#seek").value = state.frame;
  }
  function show(frame) {
    const v = state.video; if (!v) return;
    state.frame = Math.max(0, Math.min(v.frame_count - 1, frame));
    const img = new Image();
    img.onload = () => { state.image = img; draw(); };
    img.src = `/api/videos/${v.id}/frames/${state.frame}.jpg?max_size=${canvas.width}`;
  }
  function play(on) {
    state.playing = on; $("#play").textContent = on ? "❚❚" : "▶";
    clearInterval(state.timer);
    if (on) state.timer = setInterval(() => {
      if (state.frame + 1 >= state.video.frame_count) return play(false);
      show(state.frame + 1);
    }, 1000 / Math.min(state.video.fps, 15));
  }
  async function openVideo(v) {
    play(false); state.video = v; state.selected = null;
    document.querySelectorAll("#videos tr").forEach((tr) => tr.classList.toggle("selected", tr.dataset.id == v.id));
    $("#viewer-title").textContent = `${v.name} · ${v.split || "no split"} · ${v.width}×${v.height} @ ${v.fps} fps`;
    canvas.width = Math.min(960, v.width); canvas.height = Math.round(canvas.width * v.height / v.width);
    $("#seek").max = v.frame_count - 1;
    state.pool = await api(`/api/videos/${v.id}/pool/`);
    $("#traj-count").textContent = `(${state.pool.length})`;
    const body = $("#trajectories tbody"); body.innerHTML = "";
    state.pool.forEach((t) => {
      const tr = row([t.id, t.category, `${t.first_frame}–${t.last_frame}`, t.n_obs,
        `${(100 * t.temporal_coverage).toFixed(0)}%`, t.longest_run, t.abrupt_changes]);
      tr.className = "selectable";
      tr.onclick = () => { state.selected = t.id; show(t.first_frame); };
      body.appendChild(tr);
    });
    show(0);
  }
  async function load() {
    const me = await api("/api/me/");
    $("#me").textContent = `${me.username} (${me.roles.join(", ") || "no role"})`;
    const videos = (await api("/api/videos/?limit=500")).results;
    const body = $("#videos tbody"); body.innerHTML = "";
    videos.forEach((v) => {
      const tr = row([v.id, v.name, v.split || "–", v.frame_count, `${v.width}×${v.height}`]);
      tr.className = "selectable"; tr.dataset.id = v.id;
      tr.onclick = () => openVideo(v);
      body.appendChild(tr);
    });
    if (videos.length) openVideo(videos[0]);
    refreshJobs();
    setInterval(refreshJobs, 3000);
  }
  async function refreshJobs() {
    const jobs = (await api("/api/jobs/?limit=20")).results;
    const list = $("#jobs"); list.replaceChildren();
    jobs.forEach((j) => {
      const li = document.createElement("li");
      li.textContent = `#${j.id} ${j.kind}: ${j.status} ${(100 * j.progress).toFixed(0)}% — ${j.message}`;
      list.appendChild(li);
    });
    if (!jobs.length) list.textContent = "No jobs of yours.";
  }
  $("#prev").onclick = () => show(state.frame - 1);
  $("#next").onclick = () => show(state.frame + 1);
  $("#play").onclick = () => play(!state.playing);
  $("#seek").oninput = (e) => show(parseInt(e.target.value, 10));
  document.addEventListener("keydown", (e) => {
    if (e.target.tagName === "INPUT" && e.target.type !== "range") return;
    if (e.key === "ArrowLeft") show(state.frame - 1);
    else if (e.key === "ArrowRight") show(state.frame + 1);
    else if (e.key === " ") { e.preventDefault(); play(!state.playing); }
  });
  load().catch((err) => { $("#viewer-title").textContent = `Could not load: ${err.message}`; });
})();
