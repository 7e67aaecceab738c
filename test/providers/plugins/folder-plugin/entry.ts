// A plugin given as a folder: its package.json names the entry point.
export { CloseRecorder } from '../close-recorder.js';
