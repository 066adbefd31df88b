// Drives a node with @polkadot/api as a new user's script would, and prints one JSON document
// of what it saw (the pytest module tests/devnode_js asserts on it).
//
//   NET_WS_URL=ws://127.0.0.1:9944 node client_suite.mjs
//
// Funds a fresh account from //Alice (a transfer awaited with `status.isInBlock`, then
// `status.isFinalized`), then from that account: OperatorStake.register one planck below
// MinStake and at MinStake, then a heartbeat for the current epoch and one two epochs ahead.
// Every warning or error the client logs is captured and reported.

import { ApiPromise, Keyring, WsProvider } from '@polkadot/api';
import { mnemonicGenerate } from '@polkadot/util-crypto';

const logged = [];
for (const level of ['warn', 'error']) {
  const original = console[level];
  console[level] = (...args) => {
    logged.push(`${level}: ${args.map(String).join(' ')}`);
    original(...args);
  };
}

const url = process.env.NET_WS_URL;
if (!url) {
  console.log(JSON.stringify({ fatal: 'NET_WS_URL is not set' }));
  process.exit(2);
}

// Decode what the client decoded: a module error by its pallet and name, from the metadata.
function describeError(api, dispatchError) {
  if (dispatchError.isModule) {
    const meta = api.registry.findMetaError(dispatchError.asModule);
    return { module: `${meta.section}.${meta.name}` };
  }
  return { other: dispatchError.toString() };
}

// Submit and follow a transaction with the ubiquitous status callback. Resolves once finalized
// with the order of the statuses seen and what `isInBlock` delivered (its events).
function submit(api, tx, signer, options = {}) {
  return new Promise((resolve, reject) => {
    const seen = { statuses: [], inBlock: null, finalized: null };
    tx.signAndSend(signer, options, (result) => {
      const { status, events, dispatchError } = result;
      seen.statuses.push(status.type);
      if (status.isInBlock) {
        seen.inBlock = {
          hash: status.asInBlock.toHex(),
          events: events.map(({ event }) => `${event.section}.${event.method}`),
          error: dispatchError ? describeError(api, dispatchError) : null,
        };
      } else if (status.isFinalized) {
        seen.finalized = {
          hash: status.asFinalized.toHex(),
          error: dispatchError ? describeError(api, dispatchError) : null,
        };
        resolve(seen);
      } else if (status.isDropped || status.isInvalid || status.isUsurped) {
        reject(new Error(`transaction ${status.type}`));
      }
    }).catch(reject);
  });
}

// Submit transactions at consecutive nonces, each in the pool before the next is signed (as a
// script awaiting `send` would have it); records each one's statuses under its name.
async function submitBatch(api, signer, out, steps) {
  const nonce = (await api.rpc.system.accountNextIndex(signer.address)).toNumber();
  const pending = [];
  for (const [i, [name, tx]] of steps.entries()) {
    pending.push(submit(api, tx, signer, { nonce: nonce + i }).then((seen) => [name, seen]));
    await new Promise((r) => setTimeout(r, 50));
  }
  for (const [name, seen] of await Promise.all(pending)) {
    out[name] = seen;
  }
}

async function main() {
  const started = Date.now();
  const api = await ApiPromise.create({ provider: new WsProvider(url), throwOnConnect: true });
  const out = { connectMs: Date.now() - started };

  out.metadataVersion = api.runtimeMetadata.version;
  out.chain = (await api.rpc.system.chain()).toString();
  out.properties = {
    ss58Format: api.registry.chainSS58,
    tokenDecimals: api.registry.chainDecimals[0],
    tokenSymbol: api.registry.chainTokens[0],
  };
  out.specVersion = api.runtimeVersion.specVersion.toNumber();
  const minStake = api.consts.operatorStake.minStake.toBigInt();
  out.minStake = minStake.toString();

  const finalizedHeads = [];
  const unsubscribeFinalized = await api.rpc.chain.subscribeFinalizedHeads((header) => {
    finalizedHeads.push(header.number.toNumber());
  });

  const keyring = new Keyring({ type: 'sr25519', ss58Format: 42 });
  const alice = keyring.addFromUri('//Alice');
  const operator = keyring.addFromUri(mnemonicGenerate());
  out.operator = operator.address;

  // Enough for the stake, the existential deposit and the fees.
  const funding = minStake * 3n;
  out.transfer = await submit(
    api, api.tx.balances.transferKeepAlive(operator.address, funding), alice,
  );
  const account = await api.query.system.account(operator.address);
  out.operatorFree = account.data.free.toString();

  // From the operator, at consecutive nonces (so each pair may share a block): registration
  // one planck below MinStake and at MinStake; then heartbeats for the epoch current after
  // registration (the rule compares with the epoch registration recorded, which an epoch
  // boundary in between could move past a stale reading) and for two epochs ahead of it.
  const zeroHash = `0x${'00'.repeat(32)}`;
  await submitBatch(api, operator, out, [
    ['registerBelowMin', api.tx.operatorStake.register(minStake - 1n, zeroHash)],
    ['registerAtMin', api.tx.operatorStake.register(minStake, zeroHash)],
  ]);
  const epoch = (await api.query.operatorStake.currentEpoch()).toNumber();
  out.epoch = epoch;
  await submitBatch(api, operator, out, [
    ['heartbeatCurrent', api.tx.operatorStake.heartbeat(epoch)],
    ['heartbeatTwoAhead', api.tx.operatorStake.heartbeat(epoch + 2)],
  ]);
  const record = await api.query.operatorStake.operators(operator.address);
  out.operatorRecord = record.isSome ? record.unwrap().toJSON() : null;

  // Wait (bounded) until finality moved past where it was when we subscribed.
  for (let i = 0; i < 200 && new Set(finalizedHeads).size < 2; i += 1) {
    await new Promise((r) => setTimeout(r, 100));
  }
  unsubscribeFinalized();
  out.finalizedHeads = finalizedHeads;

  await api.disconnect();
  out.logged = logged;
  out.elapsedMs = Date.now() - started;
  return out;
}

main().then(
  (out) => {
    console.log(JSON.stringify(out));
    process.exit(0);
  },
  (err) => {
    console.log(JSON.stringify({ fatal: String(err && err.stack ? err.stack : err), logged }));
    process.exit(1);
  },
);
