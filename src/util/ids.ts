import { randomUUID } from 'node:crypto';
import { randomToken } from './crypto.js';

export const newSourceId = (): string => `src_${randomToken(20)}`;
export const newWriteKey = (): string => randomToken(32);
export const newAdminToken = (): string => `sy_${randomToken(40)}`;
export const newMessageId = (): string => randomUUID();
export const newRegulationId = (): string => `reg_${randomToken(20)}`;
export const newReplayId = (): string => `rpl_${randomToken(20)}`;
export const newTransformationId = (): string => `trf_${randomToken(20)}`;
