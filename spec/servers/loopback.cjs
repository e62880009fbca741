// Preloaded with `node --require` so a server that listens on every
// interface listens on 127.0.0.1 only: the specs use nothing but loopback.
const net = require('net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const port = typeof args[0] === 'string' && /^\d+$/.test(args[0]) ? Number(args[0]) : args[0];
  if (typeof port === 'number' && (args.length === 1 || typeof args[1] === 'function')) {
    args[0] = port;
    args.splice(1, 0, '127.0.0.1');
  } else if (typeof args[0] === 'object' && args[0] !== null && args[0].host === undefined) {
    args[0] = { ...args[0], host: '127.0.0.1' };
  }
  return listen.apply(this, args);
};

// With CONNECTION_LOG set, every connection the server accepts appends a
// line to that file: the specs count the connections a client opened.
if (process.env.CONNECTION_LOG) {
  const fs = require('fs');
  const emit = net.Server.prototype.emit;
  net.Server.prototype.emit = function (event, ...args) {
    if (event === 'connection') fs.appendFileSync(process.env.CONNECTION_LOG, 'connection\n');
    return emit.call(this, event, ...args);
  };
}
