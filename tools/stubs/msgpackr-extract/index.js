// See package.json: msgpackr catches this and uses its JavaScript decoder.
throw new Error('msgpackr-extract is stubbed out in Switchyard (optional native accelerator)');
