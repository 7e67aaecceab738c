// A module that exports no @provider class: loading it as a plugin must fail, saying so.
export const version = '1.0.0';
export class NotAProvider {}
