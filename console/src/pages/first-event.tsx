/**
 * What the live debugger shows while a source has no message: how to send
 * the first one, as a command to paste with the source's own write key and
 * this server's address (the Tracking API is served beside the console).
 */
export function FirstEvent({ writeKey }: { writeKey: string }) {
  const command = [
    `curl -u '${writeKey}:' -H 'Content-Type: application/json' \\`,
    `  -d '{"userId":"u1","event":"Signed Up","properties":{"plan":"pro"}}' \\`,
    `  ${location.origin}/v1/track`,
  ].join('\n');
  return (
    <section class="panel first-event" aria-labelledby="first-event-title">
      <h2 id="first-event-title">No message from this source yet</h2>
      <p>Send a first event with its write key; it shows here a moment later:</p>
      <pre tabIndex={0} aria-label="A command that sends a first event">
        <code>{command}</code>
      </pre>
      <p class="hint">
        Or point a Segment or RudderStack library at <code>{location.origin}</code> with the write key (the README's quick start shows how).
      </p>
    </section>
  );
}
