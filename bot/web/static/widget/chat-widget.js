/*
 * Chat widget for the trauma-bond support bot.
 *
 * Plain ES2017 in a classic script, no dependencies and no build step, so a
 * support organisation can embed it with one <script> tag. See README.md in
 * this folder for the embed code, every option and the privacy behaviour.
 *
 * Rules this file keeps, because visitors may be watched by the person who
 * hurt them:
 * - nothing is stored in the browser (no storage APIs, no cookies): the
 *   conversation lives in memory and in the DOM, and a reload ends it;
 * - bot and visitor text only ever reach the page through textContent;
 * - the quick exit (button or Shift three times) works at any moment.
 */
(function () {
  'use strict';

  // Only valid while this file first runs: capture it before anything async.
  const SCRIPT = document.currentScript;

  const TRANSPORTS = ['auto', 'rest', 'socket'];
  const SOCKET_CONNECT_MS = 4000;
  const REPLY_TIMEOUT_MS = 15000;
  // A socket turn has no end marker: replies that stop for this long end it.
  const QUIET_MS = 1500;
  const SHIFT_WINDOW_MS = 5000;
  const SERVER_MAX_CHARS = 5000;

  const DEFAULTS = deepFreeze({
    serverUrl: '',
    region: 'us',
    exitUrl: 'https://www.bbc.co.uk/weather',
    transport: 'auto',
    socketPath: '/socket.io',
    maxLength: 1000,
    // Folder holding chat-widget.css and hotlines/; empty = this script's folder.
    assetsUrl: '',
    autoStart: true,
    hotlines: null,
    colours: {
      primary: '#5b2c86',
      primaryText: '#ffffff',
      background: '#ffffff',
      text: '#1d1d1f'
    },
    texts: {
      title: 'Support chat',
      launcher: 'Chat with our guide',
      disclaimerLine: 'Automated guide, not a therapist or emergency service.',
      intro: 'You can ask things like why you might miss someone who hurt you. This chat is not saved on this device.',
      conversation: 'Conversation',
      inputLabel: 'Your message',
      placeholder: 'Type your message',
      send: 'Send',
      exit: 'Exit this page',
      helpNow: 'Get help now',
      safety: 'About your safety',
      close: 'Close chat',
      backToChat: 'Back to chat',
      offline: 'The chat can\u2019t be reached right now. You can try again in a moment. If you need someone now, the helplines are listed above.',
      retry: 'Try again',
      typing: 'The assistant is typing',
      error: 'Sorry, I couldn\u2019t take that message. Could you try saying it another way?',
      charsLeft: '{count} characters left',
      shortcutHint: 'To leave this page quickly at any time, press the Shift key 3 times.',
      shiftTwoMore: 'Shift, press 2 more times to exit.',
      shiftOneMore: 'Shift, press 1 more time to exit.',
      shiftExpired: 'Exit this page expired.',
      exiting: 'Loading.',
      crisisTitle: 'Help is available now',
      helpTitle: 'Help is available now',
      hotlinesFor: 'Helplines for {name}.',
      emergencyName: 'Emergency services',
      moreSupport: 'More support',
      resourcesTitle: 'Support you can contact',
      call: 'Call {phone}',
      sms: 'Text {body} to {sms}',
      smsNoBody: 'Text {sms}',
      visit: 'Visit {site}',
      newTab: '(opens in a new tab)',
      safeDevice: 'Use a device the other person cannot access if you can.',
      exitReminder: 'To leave quickly, use the \u201cExit this page\u201d button at the top or press Shift 3 times.',
      loadingHotlines: 'Loading helplines\u2026',
      noHotlines: 'The list of helplines could not be loaded. If you are in danger right now, call your local emergency number.',
      source: 'Source:',
      safetyTitle: 'About your safety',
      safetyBody: [
        'This chat keeps nothing on this device: no history, no cookies. Closing or reloading the page ends the chat, and \u201cExit this page\u201d ends it at once.',
        '',
        'What this chat cannot erase:',
        '- your browser history, which shows that you visited this website',
        '- this website\u2019s address in the address bar and in search suggestions',
        '- monitoring software or stalkerware, which can record what you type and see',
        '- shared accounts, such as an email, Google or Apple account synced to another device',
        '- your phone\u2019s keyboard, which may learn words you type and suggest them later',
        '',
        'If you can, use a private or incognito window, or a safer device the other person cannot access, such as a trusted friend\u2019s phone or a library computer.'
      ].join('\n')
    }
  });

  class ChatWidget {
    /**
     * @param {object} [config] - options (see README.md); window.ChatWidgetConfig when auto-started
     * @param {HTMLScriptElement|null} [$script] - the <script> tag, for its URL and data-* options
     */
    constructor (config = {}, $script = SCRIPT) {
      if (!document.body) {
        throw new Error('ChatWidget: document.body is missing; load chat-widget.js with `defer` or at the end of <body>.');
      }
      if (document.querySelector('[data-cw="root"][data-cw-initialised]')) {
        throw new Error('ChatWidget: already initialised on this page; include chat-widget.js only once.');
      }
      this.config = resolveConfig(config, $script);
      const cfg = this.config;
      this.serverUrl = checkUrl(cfg.serverUrl || window.location.origin, 'serverUrl');
      this.exitUrl = checkUrl(cfg.exitUrl, 'exitUrl');
      this.assetsUrl = findAssetsUrl(cfg.assetsUrl, $script);
      this.socketUrl = this.serverUrl.replace(/\/+$/, '').replace(/^http/, 'ws') +
        cfg.socketPath.replace(/\/+$/, '') + '/?EIO=4&transport=websocket';

      // Conversation state: memory only, dropped on exit.
      this.senderId = randomId();
      this.hotlines = cfg.hotlines;
      this.hotlinesPromise = null;
      this.ws = null;
      this.socketPromise = null;
      this.socketFailed = false;
      this.replyWaiters = new Set();
      this.controllers = new Set();
      this.timers = {};
      this.failedMessage = null;
      this.$turnStart = null;
      this.$lastBubble = null;
      this.$suggestionGroups = [];
      this.openSheetName = null;
      this.shiftCount = 0;
      this.shiftClean = false;
      this.exiting = false;

      this.build();
      this.loadStyles();
      this.applyColours();
      if (!this.hotlines) this.loadHotlines();

      this.onKeyDown = this.onKeyDown.bind(this);
      this.onKeyUp = this.onKeyUp.bind(this);
      // Capture phase: the shortcut must work even where the page stops propagation.
      document.addEventListener('keydown', this.onKeyDown, true);
      document.addEventListener('keyup', this.onKeyUp, true);
    }

    // ---- DOM ---------------------------------------------------------------

    build () {
      const t = this.config.texts;
      const id = 'cw-' + randomId().slice(0, 8);
      this.ids = { panel: id + '-panel', title: id + '-title', input: id + '-input', hint: id + '-hint', safety: id + '-safety', hotlines: id + '-hotlines', counter: id + '-counter' };
      const ids = this.ids;

      this.$status = h('div', { class: 'cw-visually-hidden', role: 'status' });
      this.$launcher = h('button', { type: 'button', class: 'cw-launcher', 'data-cw': 'launcher', 'aria-expanded': 'false', 'aria-controls': ids.panel, 'aria-describedby': ids.hint }, t.launcher);

      this.$lights = h('span', { class: 'cw-exit__lights', 'aria-hidden': 'true' }, [h('span'), h('span'), h('span')]);
      this.$exit = h('button', { type: 'button', class: 'cw-exit', 'data-cw': 'exit', 'aria-describedby': ids.hint }, [t.exit, this.$lights]);
      this.$close = h('button', { type: 'button', class: 'cw-close', 'data-cw': 'close', 'aria-label': t.close }, [h('span', { 'aria-hidden': 'true' }, '\u00d7')]);
      this.$helpNow = h('button', { type: 'button', class: 'cw-button cw-button--header', 'data-cw': 'help-now', 'aria-expanded': 'false', 'aria-controls': ids.hotlines }, t.helpNow);
      this.$safetyButton = h('button', { type: 'button', class: 'cw-button cw-button--header', 'data-cw': 'safety', 'aria-expanded': 'false', 'aria-controls': ids.safety }, t.safety);

      this.$log = h('div', { class: 'cw-log', 'data-cw': 'log', role: 'log', 'aria-live': 'polite', 'aria-label': t.conversation, tabindex: '0' }, [
        h('p', { class: 'cw-intro' }, t.intro)
      ]);
      this.$safety = this.sheet('safety-panel', 'cw-safety', ids.safety, t.safetyTitle, [markdown(t.safetyBody)]);
      this.$hotlineBody = h('div');
      this.$hotlines = this.sheet('hotline-card', 'cw-hotlines', ids.hotlines, t.helpTitle, [this.$hotlineBody]);

      this.$typing = h('div', { class: 'cw-typing', 'data-cw': 'typing', hidden: '' }, [
        h('span', { class: 'cw-visually-hidden' }, t.typing),
        h('span', { class: 'cw-typing__dots', 'aria-hidden': 'true' }, [h('span'), h('span'), h('span')])
      ]);
      this.$offlineText = h('p', { class: 'cw-offline__text' });
      this.$retry = h('button', { type: 'button', class: 'cw-button' }, t.retry);
      this.$offline = h('div', { class: 'cw-offline', 'data-cw': 'offline', role: 'status', hidden: '' }, [this.$offlineText, this.$retry]);

      this.$input = h('textarea', { class: 'cw-input', 'data-cw': 'input', id: ids.input, rows: '1', maxlength: String(this.config.maxLength), placeholder: t.placeholder, autocomplete: 'off', autocorrect: 'off', spellcheck: 'false', 'aria-describedby': ids.counter });
      // spellcheck off: Chrome's enhanced spell check and editor extensions send typed text to cloud services.
      this.$counter = h('p', { class: 'cw-counter', id: ids.counter });
      this.$send = h('button', { type: 'submit', class: 'cw-send', 'data-cw': 'send' }, t.send);
      this.$form = h('form', { class: 'cw-form', novalidate: '' }, [
        h('label', { class: 'cw-visually-hidden', for: ids.input }, t.inputLabel),
        this.$input, this.$send, this.$counter
      ]);

      this.$panel = h('div', { class: 'cw-panel', 'data-cw': 'panel', id: ids.panel, role: 'dialog', 'aria-labelledby': ids.title, hidden: '' }, [
        h('div', { class: 'cw-header' }, [
          h('div', { class: 'cw-header__top' }, [
            h('h2', { class: 'cw-title', id: ids.title }, t.title),
            this.$exit, this.$close
          ]),
          h('p', { class: 'cw-header__disclaimer' }, t.disclaimerLine),
          h('div', { class: 'cw-header__actions' }, [this.$helpNow, this.$safetyButton])
        ]),
        h('div', { class: 'cw-body' }, [this.$log, this.$safety, this.$hotlines]),
        this.$typing, this.$offline, this.$form
      ]);

      // A named region, so screen-reader users can jump to the chat and everything sits in a landmark.
      this.$root = h('div', { class: 'cw-root', 'data-cw': 'root', 'data-cw-initialised': '', role: 'region', 'aria-label': t.title }, [
        h('p', { class: 'cw-visually-hidden', id: ids.hint }, t.shortcutHint),
        this.$status, this.$launcher, this.$panel
      ]);
      // Hidden until the stylesheet arrives, so the host page never flashes raw markup.
      this.$root.style.visibility = 'hidden';

      this.$launcher.addEventListener('click', () => (this.$panel.hidden ? this.open() : this.close()));
      this.$close.addEventListener('click', () => this.close());
      this.$exit.addEventListener('click', () => this.exit());
      this.$helpNow.addEventListener('click', () => this.toggleSheet('hotlines'));
      this.$safetyButton.addEventListener('click', () => this.toggleSheet('safety'));
      this.$retry.addEventListener('click', () => this.retry());
      this.$form.addEventListener('submit', (event) => { event.preventDefault(); this.submit(); });
      this.$input.addEventListener('keydown', (event) => {
        // keyCode 229: an IME is composing, Enter picks a candidate instead of sending.
        if (event.key === 'Enter' && !event.shiftKey && !event.isComposing && event.keyCode !== 229) {
          event.preventDefault();
          this.submit();
        }
      });
      this.$input.addEventListener('input', () => this.onInput());
      this.$panel.addEventListener('keydown', (event) => {
        if (event.key === 'Escape') { event.preventDefault(); this.close(); }
      });
      document.body.appendChild(this.$root);
    }

    sheet (hook, className, id, title, content) {
      const $heading = h('h3', { class: 'cw-sheet__title', tabindex: '-1', id: id + '-title' }, title);
      const $back = h('button', { type: 'button', class: 'cw-button' }, this.config.texts.backToChat);
      $back.addEventListener('click', () => this.closeSheet(true));
      const $sheet = h('section', { class: 'cw-sheet ' + className, 'data-cw': hook, id, 'aria-labelledby': id + '-title', hidden: '' }, [$heading].concat(content, [$back]));
      this.$headings = Object.assign(this.$headings || {}, { [hook]: $heading });
      return $sheet;
    }

    loadStyles () {
      const show = () => { if (this.$root) this.$root.style.visibility = ''; };
      const href = this.assetsUrl + 'chat-widget.css';
      let $link = document.querySelector('link[data-cw-css]');
      if ($link) { show(); return; }
      $link = h('link', { rel: 'stylesheet', href, 'data-cw-css': '' });
      $link.addEventListener('load', show);
      $link.addEventListener('error', show);
      this.timers.css = setTimeout(show, 3000);
      document.head.appendChild($link);
      this.$css = $link;
    }

    applyColours () {
      const c = this.config.colours;
      const props = { primary: '--cw-primary', primaryText: '--cw-primary-text', background: '--cw-bg', text: '--cw-text' };
      Object.keys(props).forEach((key) => {
        if (c[key] !== DEFAULTS.colours[key]) this.$root.style.setProperty(props[key], String(c[key]));
      });
      [['primaryText', 'primary'], ['text', 'background']].forEach(([fg, bg]) => {
        const ratio = contrast(c[fg], c[bg]);
        if (ratio && ratio < 4.5) {
          console.warn(`ChatWidget: colours.${fg} on colours.${bg} has a contrast of ${ratio.toFixed(2)}:1; WCAG AA needs 4.5:1.`);
        }
      });
    }

    // ---- Panel ------------------------------------------------------------

    open () {
      this.$panel.hidden = false;
      this.$launcher.setAttribute('aria-expanded', 'true');
      this.$root.classList.add('cw-root--open');
      this.$input.focus();
      // No connection yet: the server hears nothing until the visitor sends a message.
      this.scrollToEnd();
    }

    close () {
      this.$panel.hidden = true;
      this.$launcher.setAttribute('aria-expanded', 'false');
      this.$root.classList.remove('cw-root--open');
      this.$launcher.focus();
    }

    toggleSheet (name) {
      if (this.openSheetName === name) this.closeSheet(true);
      else this.openSheet(name, true);
    }

    openSheet (name, moveFocus) {
      this.closeSheet(false);
      const $sheet = name === 'safety' ? this.$safety : this.$hotlines;
      const $button = name === 'safety' ? this.$safetyButton : this.$helpNow;
      if (name === 'hotlines') this.fillHotlines();
      $sheet.hidden = false;
      $sheet.scrollTop = 0;
      $button.setAttribute('aria-expanded', 'true');
      this.openSheetName = name;
      // Focus the heading so screen readers start reading at the top of the sheet.
      if (moveFocus) this.$headings[$sheet.getAttribute('data-cw')].focus();
    }

    closeSheet (restoreFocus) {
      const name = this.openSheetName;
      if (!name) return;
      this.openSheetName = null;
      const $button = name === 'safety' ? this.$safetyButton : this.$helpNow;
      (name === 'safety' ? this.$safety : this.$hotlines).hidden = true;
      $button.setAttribute('aria-expanded', 'false');
      if (restoreFocus) $button.focus();
    }

    // ---- Hotline directory ------------------------------------------------

    loadHotlines () {
      if (this.hotlinesPromise) return this.hotlinesPromise;
      const url = this.assetsUrl + 'hotlines/' + encodeURIComponent(this.config.region) + '.json';
      this.hotlinesPromise = fetch(url, { credentials: 'omit', referrerPolicy: 'no-referrer' })
        .then((res) => {
          if (!res.ok) throw new Error('hotlines ' + res.status);
          return res.json();
        })
        .then((data) => {
          if (!data || typeof data !== 'object') throw new Error('hotlines: not an object');
          if (this.exiting) return;
          this.hotlines = data;
          if (this.openSheetName === 'hotlines') this.fillHotlines();
        })
        .catch(() => {
          // Forget the failure so the next "Get help now" asks again.
          this.hotlinesPromise = null;
          if (this.openSheetName === 'hotlines' && !this.exiting) this.fillHotlines(true);
        });
      return this.hotlinesPromise;
    }

    fillHotlines (failed) {
      const t = this.config.texts;
      const data = this.hotlines;
      const $body = this.$hotlineBody;
      $body.textContent = '';
      if (!data) {
        $body.appendChild(h('p', {}, failed ? t.noHotlines : t.loadingHotlines));
        if (!failed) this.loadHotlines();
        return;
      }
      if (data.name) $body.appendChild(h('p', { class: 'cw-hotlines__region' }, fmt(t.hotlinesFor, { name: data.name })));
      const crisis = Array.isArray(data.crisis) ? data.crisis.slice() : [];
      const emergency = dialable(data.emergency_number);
      if (emergency && !crisis.some((r) => r && dialable(r.phone) === emergency)) {
        crisis.unshift({ name: t.emergencyName, phone: String(data.emergency_number) });
      }
      const seen = new Set(crisis.map((r) => r && r.name));
      const more = (Array.isArray(data.referral) ? data.referral : []).filter((r) => r && !seen.has(r.name));
      $body.appendChild(this.resourceList(crisis));
      if (more.length) {
        $body.appendChild(h('h4', { class: 'cw-sheet__subtitle' }, t.moreSupport));
        $body.appendChild(this.resourceList(more));
      }
      $body.appendChild(h('p', { class: 'cw-card__note' }, t.safeDevice));
      $body.appendChild(h('p', { class: 'cw-card__note' }, t.exitReminder));
    }

    resourceList (resources) {
      const t = this.config.texts;
      const $list = h('ul', { class: 'cw-resource-list' });
      (Array.isArray(resources) ? resources : []).forEach((r) => {
        if (!r || typeof r !== 'object' || !r.name) return;
        const $actions = h('div', { class: 'cw-resource__actions' });
        const phone = dialable(r.phone);
        if (phone) {
          $actions.appendChild(h('a', { class: 'cw-action cw-action--call', href: 'tel:' + phone }, fmt(t.call, { phone: String(r.phone) })));
        }
        const sms = dialable(r.sms);
        if (sms) {
          const body = r.sms_body ? String(r.sms_body) : '';
          $actions.appendChild(h('a', { class: 'cw-action', href: 'sms:' + sms + (body ? '?&body=' + encodeURIComponent(body) : '') },
            fmt(body ? t.sms : t.smsNoBody, { sms: String(r.sms), body })));
        }
        const url = safeUrl(r.url);
        if (url) {
          const site = new URL(url).host.replace(/^www\./, '');
          $actions.appendChild(h('a', { class: 'cw-action', href: url, target: '_blank', rel: 'noopener noreferrer' }, [
            fmt(t.visit, { site }), h('span', { class: 'cw-visually-hidden' }, ' ' + t.newTab)
          ]));
        }
        $list.appendChild(h('li', { class: 'cw-resource' }, [h('p', { class: 'cw-resource__name' }, String(r.name)), $actions]));
      });
      return $list;
    }

    // ---- Sending ----------------------------------------------------------

    submit () {
      const text = this.$input.value.trim();
      if (!text) { this.$input.focus(); return; }
      this.$input.value = '';
      this.onInput();
      this.sendText(text.slice(0, this.config.maxLength), text.slice(0, this.config.maxLength));
    }

    onInput () {
      const $input = this.$input;
      $input.style.height = '';
      $input.style.height = Math.min($input.scrollHeight + 4, 128) + 'px';
      const left = this.config.maxLength - $input.value.length;
      this.$counter.textContent = left <= Math.max(20, this.config.maxLength / 10) ? fmt(this.config.texts.charsLeft, { count: left }) : '';
    }

    /** Shows `shown` as the visitor's bubble and sends `message` (a button payload may differ from its title). */
    sendText (message, shown) {
      this.closeSheet(false);
      this.hideOffline();
      this.$suggestionGroups.forEach(($el) => $el.remove());
      this.$suggestionGroups = [];
      const $bubble = h('div', { class: 'cw-message cw-message--user' }, shown);
      this.$log.appendChild($bubble);
      this.$turnStart = null;
      this.$lastBubble = null;
      this.scrollToEnd();
      this.dispatch(message);
    }

    dispatch (message) {
      this.showTyping();
      this.deliver(message).catch(() => {
        if (!this.exiting) this.showOffline(message);
      });
    }

    async deliver (message) {
      const transport = this.config.transport;
      if (transport === 'socket' || (transport === 'auto' && !this.socketFailed)) {
        try {
          await this.sendBySocket(message);
          return;
        } catch (err) {
          if (this.exiting) throw err;
          // A silent or broken socket may still answer later: drop it so nothing arrives twice.
          this.dropSocket();
          if (transport === 'socket') throw err;
          this.socketFailed = true;
        }
      }
      await this.sendByRest(message);
    }

    async sendByRest (message) {
      const controller = new AbortController();
      this.controllers.add(controller);
      const timer = setTimeout(() => controller.abort(), REPLY_TIMEOUT_MS);
      try {
        const res = await fetch(this.serverUrl.replace(/\/+$/, '') + '/webhooks/rest/webhook', {
          method: 'POST',
          // The conversation id again, for the load balancer: behind several
          // servers, a conversation stays on the one that has it in memory.
          headers: { 'Content-Type': 'application/json', 'X-Conversation-Id': this.senderId },
          body: JSON.stringify({ sender: this.senderId, message, metadata: { region: this.config.region } }),
          credentials: 'omit',
          cache: 'no-store',
          referrerPolicy: 'no-referrer',
          signal: controller.signal
        });
        if (res.status >= 500) throw new Error('server error ' + res.status);
        let data = null;
        try { data = await res.json(); } catch (err) { data = null; }
        if (this.exiting) return;
        if (res.status === 429 && data && typeof data.message === 'string' && data.message.trim()) {
          // Too many messages: the server's own words (how long to wait, and
          // what to do in danger), as the socket.io channel sends them.
          this.receive([{ text: data.message }]);
        } else if (!res.ok) {
          this.receive([{ error: (data && data.error) || 'http_' + res.status }]);
        } else {
          this.receive(Array.isArray(data) ? data : []);
        }
        // REST answers a whole turn at once: no more replies are coming.
        this.hideTyping();
      } finally {
        clearTimeout(timer);
        this.controllers.delete(controller);
      }
    }

    retry () {
      const message = this.failedMessage;
      this.hideOffline();
      this.closeSheet(false);
      this.socketFailed = false;
      this.$input.focus();
      if (message) this.dispatch(message);
    }

    showOffline (message) {
      this.failedMessage = message;
      this.hideTyping();
      this.$offline.hidden = false;
      // Set after unhiding so screen readers notice the change in the status region.
      this.$offlineText.textContent = this.config.texts.offline;
      this.openSheet('hotlines', false);
    }

    hideOffline () {
      this.$offline.hidden = true;
      this.$offlineText.textContent = '';
      this.failedMessage = null;
    }

    showTyping () {
      clearTimeout(this.timers.typing);
      this.$typing.hidden = false;
    }

    hideTyping () {
      clearTimeout(this.timers.typing);
      this.$typing.hidden = true;
    }

    // ---- Socket.IO v5 over a bare WebSocket (Engine.IO v4) ----------------

    connectSocket () {
      if (this.socketPromise) return this.socketPromise;
      this.socketPromise = new Promise((resolve, reject) => {
        const ws = new WebSocket(this.socketUrl);
        this.ws = ws;
        const fail = (reason) => {
          if (this.ws !== ws) return;
          this.dropSocket();
          reject(new Error('socket: ' + reason));
        };
        this.timers.connect = setTimeout(() => fail('not connected in time'), SOCKET_CONNECT_MS);
        this.onSocketReady = () => { clearTimeout(this.timers.connect); resolve(); };
        this.onSocketFail = fail;
        ws.onmessage = (event) => this.onSocketMessage(event.data);
        ws.onerror = () => fail('error');
        ws.onclose = () => fail('closed');
      });
      this.socketPromise.catch(() => {});
      return this.socketPromise;
    }

    onSocketMessage (data) {
      if (typeof data !== 'string' || this.exiting) return;
      this.watchSocket();
      const type = data.charAt(0);
      if (type === '0') {
        const open = parseJson(data.slice(1)) || {};
        this.pingWindow = (open.pingInterval || 25000) + (open.pingTimeout || 20000);
        this.watchSocket();
        this.ws.send('40');
      } else if (type === '2') {
        this.ws.send('3');
      } else if (type === '1') {
        this.onSocketFail('server closed');
      } else if (type === '4') {
        const kind = data.charAt(1);
        if (kind === '0') {
          this.emit('session_request', { session_id: null });
        } else if (kind === '4' || kind === '1') {
          this.onSocketFail('refused');
        } else if (kind === '2') {
          // Skip an optional ack id; events for another namespace start with "/".
          const packet = parseJson(data.slice(2).replace(/^\d+/, ''));
          if (Array.isArray(packet)) this.onSocketEvent(packet[0], packet[1]);
        }
      }
    }

    onSocketEvent (name, payload) {
      if (name === 'session_confirm') {
        this.sessionId = payload;
        this.onSocketReady();
      } else if (name === 'bot_uttered') {
        this.replyWaiters.forEach((waiter) => waiter.resolve());
        this.replyWaiters.clear();
        this.receive([payload]);
        clearTimeout(this.timers.typing);
        if (!this.$typing.hidden) this.timers.typing = setTimeout(() => this.hideTyping(), QUIET_MS);
      }
    }

    async sendBySocket (message) {
      await this.connectSocket();
      return new Promise((resolve, reject) => {
        const waiter = {};
        const timer = setTimeout(() => {
          this.replyWaiters.delete(waiter);
          reject(new Error('socket: no reply'));
        }, REPLY_TIMEOUT_MS);
        waiter.resolve = () => { clearTimeout(timer); resolve(); };
        waiter.reject = (err) => { clearTimeout(timer); reject(err); };
        this.replyWaiters.add(waiter);
        this.emit('user_uttered', { message, customData: { region: this.config.region } });
      });
    }

    emit (name, data) {
      if (this.ws && this.ws.readyState === 1) this.ws.send('42' + JSON.stringify([name, data]));
    }

    // The server pings every pingInterval; silence beyond interval + timeout means the link is dead.
    watchSocket () {
      clearTimeout(this.timers.ping);
      if (this.pingWindow) this.timers.ping = setTimeout(() => this.onSocketFail && this.onSocketFail('ping timeout'), this.pingWindow);
    }

    dropSocket () {
      const ws = this.ws;
      this.ws = null;
      this.socketPromise = null;
      this.sessionId = null;
      this.pingWindow = 0;
      clearTimeout(this.timers.connect);
      clearTimeout(this.timers.ping);
      this.replyWaiters.forEach((waiter) => waiter.reject(new Error('socket: closed')));
      this.replyWaiters.clear();
      if (!ws) return;
      ws.onmessage = ws.onerror = ws.onclose = null;
      try {
        if (ws.readyState === 1) ws.send('41');
        ws.close();
      } catch (err) { /* already closing: nothing left to release */ }
    }

    // ---- Rendering (the reply contract) -----------------------------------

    receive (messages) {
      if (this.exiting) return;
      messages.forEach((msg) => {
        if (!msg || typeof msg !== 'object') return;
        try {
          this.render(msg);
        } catch (err) {
          // One malformed message must not stop the rest of the turn (a crisis card may follow).
          console.error('ChatWidget: could not show a message', err);
        }
      });
    }

    render (msg) {
      const t = this.config.texts;
      if (msg.error) {
        this.append(h('p', { class: 'cw-system' }, t.error));
        return;
      }
      if (typeof msg.text === 'string' && msg.text.trim()) {
        this.$lastBubble = h('div', { class: 'cw-message cw-message--bot' }, [markdown(msg.text)]);
        this.append(this.$lastBubble);
      }
      const buttons = Array.isArray(msg.buttons) ? msg.buttons.filter((b) => b && typeof b.payload === 'string') : [];
      if (buttons.length) {
        const $group = h('div', { class: 'cw-suggestions' }, buttons.map((b) => {
          const title = typeof b.title === 'string' && b.title ? b.title : b.payload;
          const $button = h('button', { type: 'button', class: 'cw-suggestion' }, title);
          $button.addEventListener('click', (event) => {
            this.sendText(b.payload, title);
            // The button is gone now. Keyboard users (detail 0) go on typing; a tap
            // lands on the log so a phone keyboard does not cover the answer.
            (event.detail === 0 ? this.$input : this.$log).focus({ preventScroll: true });
          });
          return $button;
        }));
        this.$suggestionGroups.push($group);
        this.append($group);
      }
      if (msg.custom && typeof msg.custom === 'object') this.renderCustom(msg.custom);
    }

    renderCustom (custom) {
      const t = this.config.texts;
      if (custom.type === 'answer') {
        const s = custom.source;
        if (!s || typeof s !== 'object') return;
        const parts = [s.title, s.publisher, s.date].filter((p) => p !== null && p !== undefined && p !== '').map(String);
        if (!parts.length) return;
        const $source = h('p', { class: 'cw-source' }, t.source + ' ' + parts.join(', '));
        // The citation belongs under the answer it came with.
        if (this.$lastBubble && this.$lastBubble.isConnected) {
          this.$lastBubble.appendChild($source);
          this.reveal();
        } else {
          this.append($source);
        }
      } else if (custom.type === 'disclaimer') {
        if (typeof custom.text === 'string' && custom.text) this.append(h('p', { class: 'cw-disclaimer' }, custom.text));
      } else if (custom.type === 'crisis_handoff') {
        // role=alert makes screen readers announce the card at once, ahead of the polite log.
        this.append(h('div', { class: 'cw-crisis', role: 'alert', 'aria-live': 'assertive' }, [
          h('h3', { class: 'cw-card__title' }, t.crisisTitle),
          this.resourceList(custom.resources),
          h('p', { class: 'cw-card__note' }, t.safeDevice),
          h('p', { class: 'cw-card__note' }, t.exitReminder)
        ]));
      } else if (custom.type === 'resources') {
        this.append(h('div', { class: 'cw-resources' }, [
          h('h3', { class: 'cw-card__title' }, t.resourcesTitle),
          this.resourceList(custom.resources)
        ]));
      }
      // "fallback" and unknown types add nothing: their text and buttons arrive as a text message.
    }

    append ($el) {
      this.$log.appendChild($el);
      if (!this.$turnStart) this.$turnStart = $el;
      this.reveal();
    }

    // Keep the start of the bot's turn in view: a long answer is read from its top, not its end.
    reveal () {
      const $log = this.$log;
      const end = $log.scrollHeight - $log.clientHeight;
      const top = this.$turnStart && this.$turnStart.isConnected ? this.$turnStart.offsetTop - 8 : end;
      $log.scrollTop = Math.max(0, Math.min(top, end));
    }

    scrollToEnd () {
      this.$log.scrollTop = this.$log.scrollHeight;
    }

    // ---- Quick exit -------------------------------------------------------

    onKeyDown (event) {
      if (event.key === 'Shift') {
        if (!event.repeat) this.shiftClean = !(event.ctrlKey || event.altKey || event.metaKey);
        return;
      }
      // Any other key means Shift was part of a combination (a capital letter, a shortcut).
      this.shiftClean = false;
      if (this.shiftCount) this.resetShift(false);
    }

    onKeyUp (event) {
      if (event.key !== 'Shift') return;
      const clean = this.shiftClean && !(event.ctrlKey || event.altKey || event.metaKey);
      this.shiftClean = false;
      if (!clean) return;
      this.shiftCount += 1;
      if (this.shiftCount >= 3) {
        this.exit();
        return;
      }
      if (this.shiftCount === 1) {
        clearTimeout(this.timers.shiftMessage);
        this.timers.shift = setTimeout(() => this.resetShift(true), SHIFT_WINDOW_MS);
      }
      this.$status.textContent = this.shiftCount === 1 ? this.config.texts.shiftTwoMore : this.config.texts.shiftOneMore;
      this.showLights();
    }

    resetShift (announce) {
      clearTimeout(this.timers.shift);
      this.shiftCount = 0;
      this.showLights();
      this.$status.textContent = announce ? this.config.texts.shiftExpired : '';
      if (announce) this.timers.shiftMessage = setTimeout(() => { if (this.$status) this.$status.textContent = ''; }, SHIFT_WINDOW_MS);
    }

    showLights () {
      this.$lights.classList.toggle('cw-exit__lights--on', this.shiftCount > 0);
      Array.prototype.forEach.call(this.$lights.children, ($light, i) => {
        $light.classList.toggle('cw-exit__light--on', i < this.shiftCount);
      });
    }

    /** Hides everything at once, forgets the conversation and leaves without a history entry. */
    exit () {
      if (this.exiting) return;
      this.exiting = true;
      const exitUrl = this.exitUrl;
      try {
        // Inline styles: the overlay must cover the page even if the stylesheet never loaded.
        const $overlay = document.createElement('div');
        $overlay.setAttribute('role', 'alert');
        $overlay.setAttribute('data-cw-overlay', '');
        $overlay.style.cssText = 'position:fixed;top:0;right:0;bottom:0;left:0;z-index:2147483647;background:#fff;color:#fff;';
        $overlay.textContent = this.config.texts.exiting;
        document.documentElement.appendChild($overlay);
      } catch (err) { /* leaving matters more than the overlay */ }
      try {
        this.destroy();
      } catch (err) { /* ditto */ }
      window.location.replace(exitUrl);
    }

    /** Removes the widget and drops every piece of conversation state. */
    destroy () {
      this.exiting = true;
      document.removeEventListener('keydown', this.onKeyDown, true);
      document.removeEventListener('keyup', this.onKeyUp, true);
      if (this.$root) this.$root.remove();
      if (this.$css) this.$css.remove();
      this.dropSocket();
      this.controllers.forEach((controller) => controller.abort());
      this.controllers.clear();
      Object.keys(this.timers).forEach((key) => clearTimeout(this.timers[key]));
      if (ChatWidget.instance === this) ChatWidget.instance = null;
      Object.keys(this).forEach((key) => {
        if (key.charAt(0) === '$' || ['hotlines', 'hotlinesPromise', 'senderId', 'sessionId', 'failedMessage', 'onSocketReady', 'onSocketFail'].includes(key)) this[key] = null;
      });
    }
  }

  ChatWidget.defaults = DEFAULTS;

  // ---- Helpers --------------------------------------------------------------

  /** Builds an element; strings become text nodes, so no markup is ever parsed. */
  function h (tag, attrs, children) {
    const $el = document.createElement(tag);
    Object.keys(attrs || {}).forEach((name) => $el.setAttribute(name, attrs[name]));
    [].concat(children === undefined ? [] : children).forEach((child) => {
      if (child === null || child === undefined) return;
      $el.appendChild(typeof child === 'string' ? document.createTextNode(child) : child);
    });
    return $el;
  }

  /** The bot's Markdown subset: blank line = paragraph, "- " = list item, other newline = <br>. */
  function markdown (text) {
    const $frag = document.createDocumentFragment();
    String(text).replace(/\r\n?/g, '\n').split(/\n[ \t]*\n/).forEach((block) => {
      let $p = null;
      let $ul = null;
      block.split('\n').forEach((line) => {
        if (/^\s*- /.test(line)) {
          $p = null;
          if (!$ul) $ul = $frag.appendChild(h('ul'));
          $ul.appendChild(h('li', {}, line.replace(/^\s*- /, '')));
        } else if (line.trim()) {
          $ul = null;
          if ($p) $p.appendChild(h('br'));
          else $p = $frag.appendChild(h('p'));
          $p.appendChild(document.createTextNode(line));
        }
      });
    });
    return $frag;
  }

  function fmt (template, values) {
    return String(template).replace(/\{(\w+)\}/g, (match, key) => (values[key] === undefined ? '' : String(values[key])));
  }

  /**
   * A phone number as a tel:/sms: target (digits, +, * and #), or '' when the
   * value is not a phone number: stripping junk could leave a wrong number.
   */
  function dialable (phone) {
    const text = phone === null || phone === undefined ? '' : String(phone).trim();
    // "+44 (0)20 …": the bracketed trunk zero is not dialled from an international number.
    return /^\+?[\d\s().*#-]{2,30}$/.test(text) ? text.replace(/\(0\)/g, '').replace(/[^\d+*#]/g, '') : '';
  }

  /** Only absolute http(s) links from the server become hrefs (never javascript: or data:). */
  function safeUrl (url) {
    if (typeof url !== 'string') return null;
    try {
      const parsed = new URL(url);
      return parsed.protocol === 'https:' || parsed.protocol === 'http:' ? parsed.href : null;
    } catch (err) {
      return null;
    }
  }

  function checkUrl (value, name) {
    let url;
    try {
      url = new URL(String(value), document.baseURI);
    } catch (err) {
      url = null;
    }
    if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
      throw new Error(`ChatWidget: ${name} must be an http(s) URL, got "${value}". Set it in window.ChatWidgetConfig or data-${kebab(name)}.`);
    }
    return url.href;
  }

  function findAssetsUrl (configured, $script) {
    const src = configured || ($script && $script.src) || '';
    if (!src) {
      throw new Error('ChatWidget: cannot tell where chat-widget.js was loaded from, so it cannot find chat-widget.css and hotlines/. Load it with <script src="…/chat-widget.js"> or set assetsUrl.');
    }
    const url = new URL(src, document.baseURI);
    url.search = '';
    url.hash = '';
    // A configured folder may lack its trailing slash; a script URL ends in the file name.
    return configured && !/\/$/.test(url.pathname) ? url.href + '/' : url.href.replace(/[^/]*$/, '');
  }

  /** defaults < config object < data-* attributes on the script tag (so the HTML can translate texts). */
  function resolveConfig (config, $script) {
    const merged = { texts: Object.assign({}, DEFAULTS.texts), colours: Object.assign({}, DEFAULTS.colours) };
    Object.keys(DEFAULTS).forEach((key) => { if (!(key in merged)) merged[key] = DEFAULTS[key]; });
    const layer = (source) => {
      Object.keys(source || {}).forEach((key) => {
        const value = source[key];
        if (!(key in DEFAULTS)) {
          console.warn(`ChatWidget: unknown option "${key}" ignored.`);
        } else if (key === 'texts' || key === 'colours') {
          Object.assign(merged[key], value || {});
        } else if (value !== undefined) {
          merged[key] = value;
        }
      });
    };
    layer(config);
    layer(fromDataset($script ? $script.dataset : {}));

    const region = String(merged.region || '').toLowerCase();
    if (!/^[a-z0-9_-]{1,32}$/.test(region)) throw new Error(`ChatWidget: region must be a short code like "us", got "${merged.region}".`);
    merged.region = region;
    if (!TRANSPORTS.includes(merged.transport)) throw new Error(`ChatWidget: transport must be one of ${TRANSPORTS.join(', ')}, got "${merged.transport}".`);
    merged.maxLength = Number(merged.maxLength);
    if (!Number.isInteger(merged.maxLength) || merged.maxLength < 1 || merged.maxLength > SERVER_MAX_CHARS) {
      throw new Error(`ChatWidget: maxLength must be a whole number from 1 to ${SERVER_MAX_CHARS}.`);
    }
    merged.socketPath = '/' + String(merged.socketPath || '/socket.io').replace(/^\/+/, '');
    if (merged.hotlines !== null && typeof merged.hotlines !== 'object') throw new Error('ChatWidget: hotlines must be an object like hotlines/<region>.json.');
    // A copy, so freezing the config never freezes the page's own object.
    if (merged.hotlines) merged.hotlines = JSON.parse(JSON.stringify(merged.hotlines));
    return deepFreeze(merged);
  }

  /** data-server-url → serverUrl; data-texts.help-now → texts.helpNow; data-colours.primary → colours.primary. */
  function fromDataset (dataset) {
    const out = {};
    Object.keys(dataset).forEach((key) => {
      let value = dataset[key];
      if (value === 'true' || value === 'false') value = value === 'true';
      const dot = key.indexOf('.');
      if (dot > 0) {
        const group = key.slice(0, dot);
        out[group] = out[group] || {};
        out[group][key.slice(dot + 1)] = value;
      } else if (key === 'hotlines') {
        out.hotlines = parseJson(value);
      } else {
        out[key] = value;
      }
    });
    return out;
  }

  function kebab (name) {
    return name.replace(/[A-Z]/g, (c) => '-' + c.toLowerCase());
  }

  function parseJson (text) {
    try {
      return JSON.parse(text);
    } catch (err) {
      return null;
    }
  }

  function randomId () {
    const bytes = new Uint8Array(16);
    window.crypto.getRandomValues(bytes);
    return Array.prototype.map.call(bytes, (b) => ('0' + b.toString(16)).slice(-2)).join('');
  }

  function deepFreeze (obj) {
    Object.keys(obj).forEach((key) => {
      if (obj[key] && typeof obj[key] === 'object' && !Object.isFrozen(obj[key])) deepFreeze(obj[key]);
    });
    return Object.freeze(obj);
  }

  /** WCAG contrast ratio of two #rgb/#rrggbb colours; null when either is another format. */
  function contrast (a, b) {
    const lum = (hex) => {
      const m = /^#([0-9a-f]{3}|[0-9a-f]{6})$/i.exec(String(hex).trim());
      if (!m) return null;
      const full = m[1].length === 3 ? m[1].replace(/./g, '$&$&') : m[1];
      const [r, g, bl] = [0, 2, 4].map((i) => {
        const v = parseInt(full.substr(i, 2), 16) / 255;
        return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
      });
      return 0.2126 * r + 0.7152 * g + 0.0722 * bl;
    };
    const la = lum(a);
    const lb = lum(b);
    if (la === null || lb === null) return null;
    return (Math.max(la, lb) + 0.05) / (Math.min(la, lb) + 0.05);
  }

  window.ChatWidget = ChatWidget;

  // ---- Auto start -----------------------------------------------------------

  const pageConfig = window.ChatWidgetConfig || {};
  const autoStart = !(pageConfig.autoStart === false || (SCRIPT && SCRIPT.dataset.autoStart === 'false'));
  const start = () => {
    if (document.querySelector('[data-cw="root"][data-cw-initialised]')) {
      console.warn('ChatWidget: already running on this page; the second copy of chat-widget.js did nothing.');
      return;
    }
    window.ChatWidget.instance = new ChatWidget(pageConfig, SCRIPT);
  };
  if (autoStart) {
    if (document.body) start();
    else document.addEventListener('DOMContentLoaded', start, { once: true });
  }
})();
