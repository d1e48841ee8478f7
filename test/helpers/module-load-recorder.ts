/**
 * A Node preload (`NODE_OPTIONS=--import …/module-load-recorder.js`) that
 * records, in the file `RECORD_MODULES_TO` names, every OpenTelemetry
 * module the process resolves (see module-load-hooks.ts), in every thread:
 * worker threads run preloads too. Nothing in the product knows about it.
 */
import { register } from 'node:module';

const file = process.env['RECORD_MODULES_TO'];
if (file !== undefined && file !== '') register(new URL('./module-load-hooks.js', import.meta.url), { data: { file } });
