import { motoServerBinary } from './moto.js';

describe("the aws tests' moto", () => {
  it('is found in the .ci venv, $MOTO_SERVER or PATH', () => {
    expect(motoServerBinary({ ...process.env, MOTO_SERVER: process.execPath })).toBe(process.execPath);
  });

  it('when missing, fails saying how to install it', () => {
    expect(() => motoServerBinary({ PATH: '/nonexistent' }, '/nonexistent/venv')).toThrow(
      /moto_server \(the EC2 emulator the aws tests run against\) is not installed: install it with: python3 -m venv .*\.ci\/moto && .*pip install "moto\[server\]==5\.2\.5" \(\.ci\/run does this\), or set MOTO_SERVER/,
    );
  });
});
